"""Clock offset between two hosts, NTP-style: UDP ping-pong, the offset of the exchange with the smallest
round trip (the one least disturbed by queueing), with its uncertainty (half that round trip).

Used only where a matrix accepts one-way latency across clock domains (`cross_host_clock: measure_offset`):
the offset is recorded with the result and shown in the report; samples are not corrected by it. A client on
host A sends its send time t1; the server on host B stamps receipt t2 and reply t3 on its own clock; A stamps
t4. offset(B − A) = ((t2 − t1) + (t3 − t4)) / 2, round trip = (t4 − t1) − (t3 − t2). Both ends read the
clock every timestamp of a sample is taken on: CLOCK_MONOTONIC (`time.monotonic_ns`), or on a cell split over
real hosts the host clock (`host_clock`: CLOCK_MONOTONIC moved onto the wall-clock epoch once per host).
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

Clock = Callable[[], int]

_REQUEST = struct.Struct("!qq")  # seq, t1
_REPLY = struct.Struct("!qqqq")  # seq, t1, t2, t3


@dataclass(frozen=True)
class ClockOffset:
    """Clock of `to_host` minus clock of `from_host`, in ns, ± `uncertainty_ns`."""

    from_host: str
    to_host: str
    offset_ns: int
    uncertainty_ns: int
    min_rtt_ns: int
    exchanges: int
    method: str = "udp ping-pong, min-rtt exchange, CLOCK_MONOTONIC"

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


class ClockServer:
    """Answers clock requests on a UDP socket until stopped (a thread: reads the clock of where it runs)."""

    def __init__(self, sock: socket.socket, clock: Clock = time.monotonic_ns):
        self.sock = sock
        self.clock = clock
        self.sock.settimeout(0.1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True, name="clock-server")

    @property
    def address(self) -> tuple[str, int]:
        return self.sock.getsockname()[:2]

    def start(self) -> ClockServer:
        self._thread.start()
        return self

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                data, peer = self.sock.recvfrom(64)
            except TimeoutError:
                continue
            except OSError:
                return
            t2 = self.clock()
            if len(data) != _REQUEST.size:
                continue
            seq, t1 = _REQUEST.unpack(data)
            with contextlib.suppress(OSError):
                self.sock.sendto(_REPLY.pack(seq, t1, t2, self.clock()), peer)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


def measure(
    sock: socket.socket,
    server: tuple[str, int],
    from_host: str,
    to_host: str,
    exchanges: int = 50,
    clock: Clock = time.monotonic_ns,
    method: str = ClockOffset.method,
) -> ClockOffset:
    """Ping-pong `exchanges` times from `sock` (bound where `from_host` runs) to a ClockServer on `to_host`."""
    sock.settimeout(0.2)
    best: tuple[int, int] | None = None  # (rtt, offset)
    answered = 0
    for seq in range(exchanges):
        t1 = clock()
        sock.sendto(_REQUEST.pack(seq, t1), server)
        try:
            while True:
                data = sock.recv(64)
                t4 = clock()
                r_seq, r_t1, t2, t3 = _REPLY.unpack(data)
                if r_seq == seq and r_t1 == t1:
                    break
        except TimeoutError:
            continue
        answered += 1
        rtt = (t4 - t1) - (t3 - t2)
        offset = ((t2 - t1) + (t3 - t4)) // 2
        if best is None or rtt < best[0]:
            best = (rtt, offset)
        time.sleep(0.002)
    if best is None:
        from ..errors import NetworkError

        raise NetworkError(f"clock offset {from_host} → {to_host}: no answer from {server[0]}:{server[1]}")
    return ClockOffset(from_host, to_host, best[1], (best[0] + 1) // 2, best[0], answered, method)


def host_clock(shift_ns: int) -> Clock:
    """CLOCK_MONOTONIC moved by `shift_ns` (this host's wall clock minus its monotonic clock, read once): the
    clock of every stamp in a cell split over real hosts. It keeps the monotonic clock's rate (no NTP steps
    during a cell) while stamps of hosts that share a clock domain (PTP/NTP-disciplined wall clocks) compare."""
    monotonic = time.monotonic_ns
    return lambda: monotonic() + shift_ns


def wall_shift_ns() -> int:
    """This host's wall clock minus its monotonic clock, now (the `host_clock` shift)."""
    return time.time_ns() - time.monotonic_ns()
