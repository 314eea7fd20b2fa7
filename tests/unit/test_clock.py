"""The NTP-style clock offset over real UDP sockets on loopback: both ends share one clock, so the true offset
is 0 and the estimate must lie within its own stated uncertainty (|offset| <= min round trip / 2)."""

from __future__ import annotations

import socket

from bench_tasks.report.cell_view import hosts_rows
from bench_tasks.topology.clock import ClockServer, measure


def test_offset_on_one_clock_is_within_its_uncertainty() -> None:
    server_sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server_sock.bind(("127.0.0.1", 0))
    server = ClockServer(server_sock).start()
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as client:
            client.bind(("127.0.0.1", 0))
            offset = measure(client, server.address, "a", "b", exchanges=20)
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
