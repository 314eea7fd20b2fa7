"""Clock offset between two hosts, NTP-style: UDP ping-pong, the offset of the exchange with the smallest
round trip (the one least disturbed by queueing), with its uncertainty (half that round trip).

Used only where a matrix accepts one-way latency across clock domains (`cross_host_clock: measure_offset`):
the offset is recorded with the result and shown in the report; samples are not corrected by it. A client on
host A sends its send time t1; the server on host B stamps receipt t2 and reply t3 on its own clock; A stamps
t4. offset(B − A) = ((t2 − t1) + (t3 − t4)) / 2, round trip = (t4 − t1) − (t3 − t2). Both ends read the
clock every timestamp of a sample is taken on: CLOCK_MONOTONIC (`time.monotonic_ns`), or on a cell split over
real hosts the host clock (`host_clock`: CLOCK_MONOTONIC moved onto the wall-clock epoch once per host).
A request carries the server's random nonce (handed to the client beside the address), and every datagram is
checked for size and nonce before it is read: strangers on the network are ignored, never a cause of failure.
"""

from __future__ import annotations

import contextlib
import secrets
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

Clock = Callable[[], int]

NONCE_BYTES = 16
_REQUEST = struct.Struct(f"!{NONCE_BYTES}sqq")  # nonce, seq, t1
_REPLY = struct.Struct(f"!{NONCE_BYTES}sqqqq")  # nonce, seq, t1, t2, t3
_REPLY_TIMEOUT_S = 0.2  # one exchange's deadline: an unanswered exchange is skipped, never waited on longer


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
    """Answers clock requests on a UDP socket until stopped (a thread: reads the clock of where it runs).

    Only requests carrying this server's `nonce` (random per server, so per cell; the client learns it with the
    address) and of exactly the request's size are answered: a stray or forged datagram is counted in `ignored`
    and dropped, so the server neither fails on it nor reflects traffic to strangers."""

    def __init__(self, sock: socket.socket, clock: Clock = time.monotonic_ns, nonce: bytes | None = None):
        self.sock = sock
        self.clock = clock
        self.nonce = nonce if nonce is not None else secrets.token_bytes(NONCE_BYTES)
        if len(self.nonce) != NONCE_BYTES:
            raise ValueError(f"a clock nonce has {NONCE_BYTES} bytes, not {len(self.nonce)}")
        self.ignored = 0
        self.sock.settimeout(0.1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True, name="clock-server")

    @classmethod
    def bound(cls, address: str, clock: Clock = time.monotonic_ns) -> ClockServer:
        """A server on a fresh UDP socket bound to `address` (an ephemeral port), not yet started."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            sock.bind((address, 0))
        except OSError:
            sock.close()
            raise
        return cls(sock, clock)

    @property
    def address(self) -> tuple[str, int]:
        return self.sock.getsockname()[:2]

    def start(self) -> ClockServer:
        self._thread.start()
        return self

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                data, peer = self.sock.recvfrom(128)
            except TimeoutError:
                continue
            except OSError:
                return
            t2 = self.clock()
            if len(data) != _REQUEST.size or not secrets.compare_digest(data[:NONCE_BYTES], self.nonce):
                self.ignored += 1
                continue
            _, seq, t1 = _REQUEST.unpack(data)
            with contextlib.suppress(OSError):
                self.sock.sendto(_REPLY.pack(self.nonce, seq, t1, t2, self.clock()), peer)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
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
    *,
    nonce: bytes,
) -> ClockOffset:
    """Ping-pong `exchanges` times from `sock` (bound where `from_host` runs) to a ClockServer on `to_host` whose
    nonce is `nonce`. Each exchange waits at most `_REPLY_TIMEOUT_S` for its own answer; datagrams that are not
    it (another size, another nonce, an old sequence number) are skipped without extending that deadline."""
    best: tuple[int, int] | None = None  # (rtt, offset)
    answered = 0
    for seq in range(exchanges):
        t1 = clock()
        sock.sendto(_REQUEST.pack(nonce, seq, t1), server)
        reply = _await_reply(sock, nonce, seq, t1, time.monotonic() + _REPLY_TIMEOUT_S, clock)
        if reply is None:
            continue
        t2, t3, t4 = reply
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


def _await_reply(
    sock: socket.socket, nonce: bytes, seq: int, t1: int, deadline: float, clock: Clock
) -> tuple[int, int, int] | None:
    """(t2, t3, t4) of the answer to request `seq` sent at `t1`, or None once `deadline` (monotonic s) passed."""
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            data = sock.recv(128)
        except TimeoutError:
            return None
        t4 = clock()
        if len(data) != _REPLY.size:
            continue
        r_nonce, r_seq, r_t1, t2, t3 = _REPLY.unpack(data)
        if r_nonce == nonce and r_seq == seq and r_t1 == t1:
            return t2, t3, t4
    return None


def host_clock(shift_ns: int) -> Clock:
    """CLOCK_MONOTONIC moved by `shift_ns` (this host's wall clock minus its monotonic clock, read once): the
    clock of every stamp in a cell split over real hosts. It keeps the monotonic clock's rate (no NTP steps
    during a cell) while stamps of hosts that share a clock domain (PTP/NTP-disciplined wall clocks) compare."""
    monotonic = time.monotonic_ns
    return lambda: monotonic() + shift_ns


def wall_shift_ns() -> int:
    """This host's wall clock minus its monotonic clock, now (the `host_clock` shift)."""
    return time.time_ns() - time.monotonic_ns()
