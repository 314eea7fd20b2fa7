"""Listening ports for the brokers the harness starts.

A port is chosen outside the kernel's ephemeral range. Ports from `bind(0)` come from that range, and so do the
source ports of every outgoing connection: a cluster node dialling its peers can take the port picked for a node
not yet started, which then fails with "address already in use". Below the range, only another listener can take
it, and the random choice makes that unlikely.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST_PORT = 10_000  # below this lie the well-known and registered services a host may run
FALLBACK_EPHEMERAL_LOW = 32_768  # Linux's default when the range cannot be read
ATTEMPTS_PER_PORT = 50


def ephemeral_low() -> int:
    """The lowest port of the kernel's ephemeral range (of the calling thread's network namespace)."""
    try:
        return int(EPHEMERAL_RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return FALLBACK_EPHEMERAL_LOW


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` distinct ports free on `host`, below the ephemeral range. All are held open together while they
    are chosen, so none is handed out twice; a range too small to choose from falls back to `bind(0)`."""
    low = ephemeral_low()
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sockets.append(_bound(host, LOWEST_PORT, low - 1) if low - 1 > LOWEST_PORT else _bound_any(host))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def free_port(host: str = "127.0.0.1") -> int:
    """One port free on `host` (see `free_ports`)."""
    return free_ports(1, host)[0]


def _bound(host: str, low: int, high: int) -> socket.socket:
    """A socket bound to a random free port in [low, high]; `bind(0)` if none of the tries was free."""
    for _ in range(ATTEMPTS_PER_PORT):
        sock = socket.socket()
        try:
            sock.bind((host, random.randint(low, high)))
        except OSError:
            sock.close()
            continue
        return sock
    return _bound_any(host)


def _bound_any(host: str) -> socket.socket:
    sock = socket.socket()
    sock.bind((host, 0))
    return sock
