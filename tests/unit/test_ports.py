"""Broker ports are chosen where outgoing connections cannot take them."""

from __future__ import annotations

import json
import random
import socket
import time
from pathlib import Path

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


def _picks(monkeypatch, *first: int) -> None:
    """`random.randint` gives `first` in order, then what it would have."""
    queue, real = list(first), random.randint
    monkeypatch.setattr(ports.random, "randint", lambda low, high: queue.pop(0) if queue else real(low, high))


def test_a_port_another_process_chose_lately_is_not_chosen_again(monkeypatch, tmp_path: Path) -> None:
    """Chosen ports are closed until their broker binds them: the reservation keeps a second choice off them."""
    monkeypatch.setattr(ports, "reserved_ports_path", lambda: tmp_path / "ports.json")
    (first,) = free_ports(1)
    reserved = json.loads((tmp_path / "ports.json").read_text())
    assert time.time() < reserved[str(first)] <= time.time() + ports.RESERVED_FOR_S
    _picks(monkeypatch, first, first)
    (second,) = free_ports(1)
    assert second != first and set(json.loads((tmp_path / "ports.json").read_text())) == {str(first), str(second)}


def test_a_reservation_that_ended_is_dropped(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(ports, "reserved_ports_path", lambda: tmp_path / "ports.json")
    (port,) = free_ports(1)
    (tmp_path / "ports.json").write_text(json.dumps({str(port): time.time() - 1, "1": "not a time"}))
    _picks(monkeypatch, port)
    assert free_ports(1) == [port]
    assert set(json.loads((tmp_path / "ports.json").read_text())) == {str(port)}
