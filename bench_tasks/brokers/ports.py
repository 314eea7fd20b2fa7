"""Listening ports for the brokers the harness starts.

A port is chosen outside the kernel's ephemeral range. Ports from `bind(0)` come from that range, and so do the
source ports of every outgoing connection: a cluster node dialling its peers can take the port picked for a node
not yet started, which then fails with "address already in use". Below the range, only another listener can take
it, and the random choice makes that unlikely.

Unlikely is not never: a port is chosen, then closed, and bound by the broker only once its process is up (seconds,
for a JVM). Another sixnines process choosing in that window (a cluster starting beside a cell's brokers, a test
suite's workers) could pick it too, and one of the two brokers then exits "address already in use" (seen once in a
clean-clone test run). So every choice is recorded, under a lock, in a file that other processes of this user read
(`reserved_ports_path`), and a port chosen in the last `RESERVED_FOR_S` seconds is not chosen again.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import random
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST_PORT = 10_000  # below this lie the well-known and registered services a host may run
FALLBACK_EPHEMERAL_LOW = 32_768  # Linux's default when the range cannot be read
ATTEMPTS_PER_PORT = 50
RESERVED_FOR_S = 120.0  # time enough for a JVM started on a loaded host to bind what was chosen for it


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
    with _reservations() as reserved:
        try:
            for _ in range(count):
                fits = low - 1 > LOWEST_PORT
                sockets.append(_bound(host, LOWEST_PORT, low - 1, reserved) if fits else _bound_any(host))
            chosen = [sock.getsockname()[1] for sock in sockets]
        finally:
            for sock in sockets:
                sock.close()
        reserved.update(dict.fromkeys(map(str, chosen), time.time() + RESERVED_FOR_S))
    return chosen


def free_port(host: str = "127.0.0.1") -> int:
    """One port free on `host` (see `free_ports`)."""
    return free_ports(1, host)[0]


def reserved_ports_path() -> Path:
    """The ports this user's sixnines processes chose lately (a JSON map of port to the time its reservation ends)."""
    return Path(tempfile.gettempdir()) / f"sixnines-{os.getuid()}-ports.json"


@contextlib.contextmanager
def _reservations() -> Iterator[dict[str, float]]:
    """The reservations still running, held under an exclusive lock for the block; what the block adds is saved."""
    path = reserved_ports_path()
    with open(path.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            held = json.loads(path.read_text())
        except (OSError, ValueError):  # none yet, or cut short: start over
            held = {}
        now = time.time()
        entries = held.items() if isinstance(held, dict) else ()
        running = {port: until for port, until in entries if isinstance(until, float) and until > now}
        yield running
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        partial.write_text(json.dumps(running))
        partial.replace(path)


def _bound(host: str, low: int, high: int, reserved: dict[str, float]) -> socket.socket:
    """A socket bound to a random free port in [low, high] that no one reserved; `bind(0)` if none of the tries
    was."""
    for _ in range(ATTEMPTS_PER_PORT):
        port = random.randint(low, high)
        if str(port) in reserved:
            continue
        sock = socket.socket()
        try:
            sock.bind((host, port))
        except OSError:
            sock.close()
            continue
        return sock
    return _bound_any(host)


def _bound_any(host: str) -> socket.socket:
    sock = socket.socket()
    sock.bind((host, 0))
    return sock
