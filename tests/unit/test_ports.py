"""Broker ports are chosen where outgoing connections cannot take them."""

from __future__ import annotations

import socket

from bench_tasks.brokers import ports
from bench_tasks.brokers.ports import ephemeral_low, free_ports


def test_ports_are_distinct_free_and_below_the_ephemeral_range() -> None:
    chosen = free_ports(30)
    assert len(set(chosen)) == 30
    assert all(ports.LOWEST_PORT <= port < ephemeral_low() for port in chosen)
    for port in chosen:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))  # raises if the port was not free


def test_a_port_held_by_a_listener_is_never_chosen(monkeypatch) -> None:
    """With the held port the only one in range, every try fails and the choice falls back to bind(0)."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        monkeypatch.setattr(ports, "LOWEST_PORT", taken - 1)
        monkeypatch.setattr(ports, "ephemeral_low", lambda: taken + 1)
        monkeypatch.setattr(ports.random, "randint", lambda low, high: taken)
        assert taken not in free_ports(2)
