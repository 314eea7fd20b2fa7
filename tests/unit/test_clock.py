"""The NTP-style clock offset over real UDP sockets on loopback: both ends share one clock, so the true offset
is 0 and the estimate must lie within its own stated uncertainty (|offset| <= min round trip / 2)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from bench_tasks.errors import NetworkError
from bench_tasks.report.cell_view import hosts_rows
from bench_tasks.topology.clock import _REQUEST, ClockServer, measure


def test_offset_on_one_clock_is_within_its_uncertainty() -> None:
    server_sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server_sock.bind(("127.0.0.1", 0))
    server = ClockServer(server_sock).start()
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as client:
            client.bind(("127.0.0.1", 0))
            offset = measure(client, server.address, "a", "b", exchanges=20, nonce=server.nonce)
    finally:
        server.stop()
    assert offset.exchanges == 20
    assert 0 < offset.min_rtt_ns < 50_000_000
    assert abs(offset.offset_ns) <= offset.uncertainty_ns + 1
    assert offset.to_dict()["from_host"] == "a" and offset.to_dict()["to_host"] == "b"


def test_report_states_the_offset_beside_uncorrected_samples() -> None:
    rows = dict(
        hosts_rows(
            {
                "placement": {"producers": ["a"], "consumers": ["b"]},
                "clock_offsets": [
                    {
                        "from_host": "a",
                        "to_host": "b",
                        "offset_ns": 1_500_000,
                        "uncertainty_ns": 20_000,
                        "exchanges": 50,
                    }
                ],
            }
        )
    )
    assert rows["measured clock offset"].startswith("b − a: +1.500 ms ± 0.020 ms")
    assert "not corrected" in rows["measured clock offset"]
    assert rows["network cap"] == "none"
    assert hosts_rows(None) == []


# -- a clock server and client that strangers cannot disturb --------------------------------------------------


class Spammer:
    """Sends `payloads` to `target` from its own socket every millisecond until stopped (a stranger on the net)."""

    def __init__(self, target: tuple[str, int], payloads: list[bytes]):
        import threading

        self.target, self.payloads = target, payloads
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._send, daemon=True)
        self.sent = 0

    def _send(self) -> None:
        import contextlib

        while not self._stop.is_set():
            for payload in self.payloads:
                with contextlib.suppress(OSError):
                    self.sock.sendto(payload, self.target)
                    self.sent += 1
            self._stop.wait(0.001)

    def __enter__(self) -> Spammer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


def _serve() -> ClockServer:
    server_sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server_sock.bind(("127.0.0.1", 0))
    return ClockServer(server_sock).start()


def test_stray_datagrams_to_the_client_are_ignored() -> None:
    """A datagram of the wrong size (or the right size from someone else) must not raise struct.error and fail
    the cell: the exchange skips it and waits for its own answer."""
    server = _serve()
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as client:
            client.bind(("127.0.0.1", 0))
            junk = [b"x", b"\x00" * 7, b"\x01" * 48, b"\x02" * 200]
            with Spammer(client.getsockname(), junk) as spammer:
                offset = measure(client, server.address, "a", "b", exchanges=20, nonce=server.nonce)
    finally:
        server.stop()
    assert spammer.sent > 0 and offset.exchanges > 0
    assert abs(offset.offset_ns) <= offset.uncertainty_ns + 1


@pytest.mark.timeout(60)
def test_the_exchange_keeps_its_deadline_under_a_stream_of_strangers() -> None:
    """Answers that never match (a flood of well-sized garbage) end each exchange at its deadline: the client
    gives up with a NetworkError in bounded time instead of reading strangers forever."""
    import time

    with (
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent,
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as client,
    ):
        silent.bind(("127.0.0.1", 0))  # a "server" that never answers
        client.bind(("127.0.0.1", 0))
        with Spammer(client.getsockname(), [b"\x03" * 56, b"\x04" * 32]):
            began = time.monotonic()
            with pytest.raises(NetworkError, match="no answer"):
                measure(client, silent.getsockname(), "a", "b", exchanges=5, nonce=b"n" * 16)
            took = time.monotonic() - began
    assert took < 5, f"5 exchanges took {took:.1f} s"


def test_the_server_answers_only_requests_of_its_cell() -> None:
    """Wrong sizes and requests without the cell's nonce get no answer (the server is no reflector); the cell's
    own client is answered all the while."""
    server = _serve()
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as stranger:
            stranger.bind(("127.0.0.1", 0))
            stranger.settimeout(0.3)
            for payload in (b"x", b"\x00" * 16, b"\x00" * (len(server.nonce) + 16)):
                stranger.sendto(payload, server.address)
                with pytest.raises(TimeoutError):
                    stranger.recv(64)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as client:
            client.bind(("127.0.0.1", 0))
            with Spammer(server.address, [b"y", b"\x05" * 32, b"\x06" * 40]):
                offset = measure(client, server.address, "a", "b", exchanges=10, nonce=server.nonce)
    finally:
        server.stop()
    assert offset.exchanges == 10 and server.ignored >= 3


def test_a_load_host_serves_its_clock_on_its_advertised_address_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On real hosts the consumer host's clock server binds SIXNINES_HOST_ADDRESS (not 0.0.0.0) and publishes it
    with the cell's nonce in the rendezvous; a stray datagram does not fail its part; the producer host measures it."""
    import threading

    from bench_tasks.topology.hosts import _across_hosts
    from bench_tasks.topology.rendezvous import HostPart, Rendezvous

    monkeypatch.setenv("SIXNINES_HOST_ADDRESS", "127.0.0.2")
    pairs = [("a", "b")]
    parts = {h: HostPart(h, Rendezvous(tmp_path, ("a", "b"), h, "cell"), leader=h == "a") for h in "ab"}
    served: list[object] = []
    thread = threading.Thread(target=lambda: served.append(_across_hosts(pairs, parts["b"])), daemon=True)
    thread.start()
    note = parts["a"].rendezvous.wait("clock", 20, ("b",))["b"]
    host, port = note["address"]
    assert host == "127.0.0.2" and len(bytes.fromhex(note["nonce"])) >= 16
    request = _REQUEST.pack(bytes.fromhex(note["nonce"]), 0, 0)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.settimeout(2)
        probe.sendto(b"stray", (host, port))
        probe.sendto(request, (host, port))
        assert len(probe.recv(128)) == 48  # answered on the advertised address
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as other:
        other.settimeout(2)
        other.connect(("127.0.0.1", port))  # connected: the kernel reports the port unreachable
        other.send(request)
        with pytest.raises(ConnectionRefusedError):  # not bound on any other address of the host
            other.recv(128)
    measured = _across_hosts(pairs, parts["a"])
    thread.join(30)
    assert served == [[]] and [(o["from_host"], o["to_host"]) for o in measured] == [("a", "b")]
    assert measured[0]["exchanges"] > 0
