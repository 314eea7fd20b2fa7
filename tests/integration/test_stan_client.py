"""The streaming protocol client against a real nats-streaming-server: connect, publish with PubAck, subscribe
(durable and not, queue groups, start positions), manual acks and redelivery, durable resume after the client
restarts, unsubscribe and close, and the errors a benchmark must see (refused ids, unknown clusters, PubAcks that
never come)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import nats
import pytest

from bench_tasks.systems.stan import client as stan
from bench_tasks.systems.stan.provision import start_server
from bench_tasks.systems.stan.server import monitor
from bench_tasks.systems.stan.settings import StanBroker
from tests.integration.helpers import STAN_RELEASE

pytestmark = pytest.mark.alongside

SUBJECT = "sixnines.client"


class Server:
    def __init__(self, started: Any):
        self.started = started
        self.url = started.address
        self.cluster_id = started.client["cluster_id"]
        self.login = {k: v for k, v in started.client.items() if k in ("user", "password")}  # the cell's own user
        self.monitor_url = started.context["monitor_url"]

    async def connect(self, client_id: str, **options: Any) -> stan.StanConnection:
        nc = await nats.connect(self.url, **self.login)
        return await stan.connect(nc, self.cluster_id, client_id, owns_nc=True, **options)


@pytest.fixture
def server(tmp_path: Path, no_orphans: None) -> Iterator[Server]:
    started = start_server(STAN_RELEASE, StanBroker(store="file"), tmp_path, "client-itest")
    try:
        yield Server(started)
    finally:
        started.nodes.stop()


def run(scenario: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(asyncio.wait_for(scenario(), 30))


async def until(check: Callable[[], bool], timeout_s: float = 5.0) -> None:
    for _ in range(int(timeout_s / 0.01)):
        if check():
            return
        await asyncio.sleep(0.01)


async def publish_all(conn: stan.StanConnection, payloads: list[bytes]) -> list[str | None]:
    outcomes: list[str | None] = []
    for data in payloads:
        await conn.publish(SUBJECT, data, outcomes.append)
    assert await conn.wait_for_acks(5) == 0
    return outcomes


def test_publish_is_acknowledged_and_delivered_in_order(server: Server) -> None:
    async def scenario() -> tuple[list[str | None], list[tuple[int, bytes, bool]]]:
        conn = await server.connect("pub-sub")
        got: list[tuple[int, bytes, bool]] = []
        await conn.subscribe(SUBJECT, lambda m: got.append((m.sequence, m.data, m.redelivered)))
        outcomes = await publish_all(conn, [b"m%d" % i for i in range(50)])
        await until(lambda: len(got) == 50)
        await conn.close()
        return outcomes, got

    outcomes, got = run(scenario)
    assert outcomes == [None] * 50
    assert got == [(i + 1, b"m%d" % i, False) for i in range(50)]


def test_start_positions_pick_where_a_new_subscription_begins(server: Server) -> None:
    async def scenario() -> dict[str, list[int]]:
        conn = await server.connect("positions")
        await publish_all(conn, [b"x"] * 5)
        seen: dict[str, list[int]] = {}
        for position, extra in [("first", {}), ("last_received", {}), ("sequence", {"start_sequence": 3})]:
            seen[position] = []
            opts = stan.SubscriptionOptions(start_position=position, **extra)
            await conn.subscribe(SUBJECT, lambda m, p=position: seen[p].append(m.sequence), opts)
        seen["new_only"] = []
        await conn.subscribe(SUBJECT, lambda m: seen["new_only"].append(m.sequence))
        await publish_all(conn, [b"y"])
        await until(lambda: len(seen["first"]) == 6 and len(seen["new_only"]) == 1)
        await conn.close()
        return seen

    assert run(scenario) == {
        "first": [1, 2, 3, 4, 5, 6],
        "last_received": [5, 6],
        "sequence": [3, 4, 5, 6],
        "new_only": [6],
    }


def test_a_durable_resumes_at_the_first_unacknowledged_message_after_the_client_restarts(server: Server) -> None:
    """Seed 000's description of durables: the server tracks the last acknowledged message; a restarted client
    gets the unacknowledged ones again (redelivered) and then what was published while it was away."""
    opts = stan.SubscriptionOptions(durable="d1", manual_acks=True, start_position="first", max_in_flight=100)

    async def scenario() -> list[tuple[int, bool]]:
        pub = await server.connect("durable-pub")
        await publish_all(pub, [b"a%d" % i for i in range(10)])
        first = await server.connect("durable-sub")
        delivered: list[Any] = []
        sub = await first.subscribe(SUBJECT, delivered.append, opts)
        await until(lambda: len(delivered) == 10)
        for m in delivered[:5]:
            await sub.ack(m)
        await first.nc.flush()
        await first.close()  # the durable stays on the server
        await publish_all(pub, [b"b%d" % i for i in range(5)])
        again = await server.connect("durable-sub")  # the same client id: the same durable
        resumed: list[tuple[int, bool]] = []
        await again.subscribe(SUBJECT, lambda m: resumed.append((m.sequence, m.redelivered)), opts)
        await until(lambda: len(resumed) == 10)
        await asyncio.sleep(0.1)  # nothing else may come
        await again.close()
        await pub.close()
        return resumed

    assert run(scenario) == [(s, True) for s in range(6, 11)] + [(s, False) for s in range(11, 16)]


def test_a_manual_ack_the_connection_cannot_send_fails_naming_the_delivery(server: Server) -> None:
    """Its NATS connection closed, a subscriber's Ack cannot leave: `ack` raises the client's own error, naming
    the delivery, rather than passing nats-py's on or dropping the Ack."""
    opts = stan.SubscriptionOptions(manual_acks=True)

    async def scenario() -> None:
        conn = await server.connect("ack-closed")
        delivered: list[Any] = []
        sub = await conn.subscribe(SUBJECT, delivered.append, opts)
        await publish_all(conn, [b"unacked"])
        await until(lambda: len(delivered) == 1)
        await conn.nc.close()
        with pytest.raises(stan.StanError, match=f"Ack of {SUBJECT} #1 not sent: ConnectionClosedError"):
            await sub.ack(delivered[0])
        await conn.close()

    run(scenario)


def test_unsubscribe_forgets_a_durable_and_close_keeps_it(server: Server) -> None:
    async def durables() -> list[str]:
        channels = await asyncio.to_thread(monitor, server.monitor_url, "channelsz?subs=1")
        subs = [s for c in channels.get("channels", []) for s in c.get("subscriptions", [])]
        return sorted(s["durable_name"] for s in subs if s.get("is_durable"))

    async def scenario() -> tuple[list[str], list[str], list[str]]:
        conn = await server.connect("durables")
        await publish_all(conn, [b"x"])
        kept = await conn.subscribe(SUBJECT, lambda m: None, stan.SubscriptionOptions(durable="kept"))
        gone = await conn.subscribe(SUBJECT, lambda m: None, stan.SubscriptionOptions(durable="gone"))
        both = await durables()
        await gone.unsubscribe()
        await kept.close()
        after = await durables()
        await conn.close()
        return both, after, await durables()

    both, after_unsubscribe, after_close = run(scenario)
    assert both == ["gone", "kept"]
    assert after_unsubscribe == ["kept"]  # closed, offline, still there
    assert after_close == ["kept"]


def test_a_queue_group_shares_the_messages(server: Server) -> None:
    async def scenario() -> tuple[list[int], list[int]]:
        conn = await server.connect("queues")
        a: list[int] = []
        b: list[int] = []
        await conn.subscribe(SUBJECT, lambda m: a.append(m.sequence), stan.SubscriptionOptions(queue="q"))
        await conn.subscribe(SUBJECT, lambda m: b.append(m.sequence), stan.SubscriptionOptions(queue="q"))
        await publish_all(conn, [b"x"] * 40)
        await until(lambda: len(a) + len(b) == 40)
        await conn.close()
        return a, b

    a, b = run(scenario)
    assert sorted(a + b) == list(range(1, 41))
    assert a and b


def test_an_unacknowledged_delivery_comes_again_after_ack_wait(server: Server) -> None:
    async def scenario() -> list[tuple[int, bool]]:
        conn = await server.connect("redeliver")
        got: list[tuple[int, bool]] = []
        opts = stan.SubscriptionOptions(manual_acks=True, ack_wait_s=1)
        await conn.subscribe(SUBJECT, lambda m: got.append((m.sequence, m.redelivered)), opts)
        await publish_all(conn, [b"x"])
        await until(lambda: len(got) >= 2, timeout_s=5)
        await conn.close()
        return got[:2]

    assert run(scenario) == [(1, False), (1, True)]


def test_close_ends_the_client_on_the_server(server: Server) -> None:
    async def clients() -> list[str]:
        found = await asyncio.to_thread(monitor, server.monitor_url, "clientsz")
        return [c["id"] for c in found.get("clients") or []]

    async def scenario() -> tuple[list[str], list[str]]:
        conn = await server.connect("closing")
        during = await clients()
        await conn.close()
        after = await clients()
        with pytest.raises(stan.StanError, match="the streaming connection is closed"):
            await conn.publish(SUBJECT, b"x", lambda _e: None)
        return during, after

    assert run(scenario) == (["closing"], [])


def test_a_second_client_with_the_same_id_is_refused_by_the_server(server: Server) -> None:
    async def scenario() -> None:
        first = await server.connect("twin")
        try:
            with pytest.raises(stan.StanError, match="refused the connection: stan: clientID already registered"):
                await server.connect("twin")
        finally:
            await first.close()

    run(scenario)


def test_an_unknown_cluster_does_not_answer(server: Server) -> None:
    async def scenario() -> None:
        nc = await nats.connect(server.url, **server.login)
        try:
            with pytest.raises(stan.StanError, match="connect to cluster 'nobody': no answer"):
                await stan.connect(nc, "nobody", "c", connect_timeout_s=0.5)
        finally:
            await nc.close()

    run(scenario)


def test_a_client_id_the_server_would_refuse_is_named_first(server: Server) -> None:
    async def scenario() -> None:
        nc = await nats.connect(server.url, **server.login)
        try:
            with pytest.raises(stan.StanError, match=r"client id 'a b': use letters, digits"):
                await stan.connect(nc, server.cluster_id, "a b")
        finally:
            await nc.close()

    run(scenario)


def test_pub_acks_that_never_come_fail_and_a_full_window_refuses_at_once(server: Server) -> None:
    async def scenario() -> tuple[list[str | None], str]:
        conn = await server.connect("timeouts", pub_ack_wait_s=0.3, max_pub_acks_in_flight=3)
        outcomes: list[str | None] = []
        server.started.nodes.pause(0)  # a frozen server stores and acknowledges nothing
        try:
            for _ in range(3):
                await conn.publish(SUBJECT, b"x", outcomes.append)
            with pytest.raises(stan.PublishWindowFull) as full:
                await conn.publish(SUBJECT, b"x", outcomes.append)
            await until(lambda: len(outcomes) == 3, timeout_s=3)
        finally:
            server.started.nodes.resume(0)
        await conn.close()
        return outcomes, str(full.value)

    outcomes, full = run(scenario)
    assert outcomes == ["no PubAck within 0.3 s"] * 3
    assert full == "3 publishes wait for their PubAck (max_pub_acks_in_flight)"


def test_close_fails_the_publishes_still_waiting(server: Server) -> None:
    async def scenario() -> list[str | None]:
        conn = await server.connect("closing-early")
        outcomes: list[str | None] = []
        server.started.nodes.pause(0)
        for _ in range(2):
            await conn.publish(SUBJECT, b"x", outcomes.append)
        closing = asyncio.create_task(conn.close())
        await until(lambda: len(outcomes) == 2)
        server.started.nodes.resume(0)
        await closing
        return outcomes

    assert run(scenario) == ["connection closed"] * 2
