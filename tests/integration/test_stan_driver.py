"""The NATS Streaming driver against a real server, without a cell: batched publishes and their PubAcks, deliveries
handed over in batches with their channel sequences, a durable queue group that resumes where the driver that
closed left off (the cell's consumers, restarted), Acks a closed connection could not send, counted, and
connections lost with their server, closed and forgotten."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench_tasks.brokers.handles import StartedBrokers
from bench_tasks.systems import system
from bench_tasks.systems.stan.driver import StanDriver
from bench_tasks.systems.stan.provision import start_server
from bench_tasks.systems.stan.settings import StanBroker, StanCell
from tests.integration.helpers import STAN_RELEASE

pytestmark = pytest.mark.alongside


def spec(client: dict[str, Any] | None = None) -> StanCell:
    return StanCell.model_validate(
        {
            "system": "stan",
            "version": STAN_RELEASE,
            "broker": {"store": "file"},
            "client": client or {},
            "workload": {"message_size_bytes": 64, "rate_per_s": 50, "measure_s": 1},
            "measurement": "e2e",
        }
    )


@pytest.fixture
def server(tmp_path: Path, no_orphans: None) -> Iterator[StartedBrokers]:
    started = start_server(STAN_RELEASE, StanBroker(store="file"), tmp_path, "driver-itest")
    try:
        yield started
    finally:
        started.nodes.stop()


def driver(server: StartedBrokers, cell: StanCell) -> StanDriver:
    made = system("stan").driver(server.address, cell, "itest", "", server.client)
    assert isinstance(made, StanDriver)
    return made


class Received:
    def __init__(self) -> None:
        self.batches: list[tuple[list[bytes], list[int]]] = []

    def __call__(self, batch: Any) -> None:
        assert batch.partitions() is None
        self.batches.append((list(batch.payloads()), list(batch.offsets())))

    @property
    def sequences(self) -> list[int]:
        return [s for _, seqs in self.batches for s in seqs]


async def send(d: StanDriver, seqs: range) -> list[tuple[int, str | None]]:
    """One batch through `send_batch`; returns each message's outcome once every PubAck came."""
    (conn,) = await d.open_producer("p", 1)
    acks: list[tuple[int, str | None]] = []
    refused = await d.send_batch(conn, ((s, 0, b"m%03d" % s) for s in seqs), lambda s, _p, _o, e: acks.append((s, e)))
    assert refused == {}
    for _ in range(500):
        if len(acks) == len(seqs):
            break
        await asyncio.sleep(0.01)
    return acks


async def until(check: Any, timeout_s: float = 5.0) -> None:
    for _ in range(int(timeout_s / 0.01)):
        if check():
            return
        await asyncio.sleep(0.01)


def test_a_batch_is_acknowledged_and_handed_over_in_batches(server: StartedBrokers) -> None:
    async def scenario() -> tuple[list[tuple[int, str | None]], Received, dict[str, Any]]:
        consumer, producer = driver(server, spec()), driver(server, spec())
        got = Received()
        await consumer.open_consumer("c", got)
        acks = await send(producer, range(100))
        await until(lambda: len(got.sequences) == 100)
        await producer.close()
        await consumer.close()
        return acks, got, {**consumer.errors.summary(), **{"producer": producer.errors.summary()}}

    acks, got, errors = asyncio.run(scenario())
    assert sorted(acks) == [(s, None) for s in range(100)]
    assert got.sequences == list(range(1, 101))
    assert [p for payloads, _ in got.batches for p in payloads] == [b"m%03d" % s for s in range(100)]
    assert len(got.batches) < 100  # handed over per read, not per message
    assert errors["count"] == 0 and errors["producer"]["count"] == 0


def test_a_durable_queue_group_resumes_after_its_consumers_restart(server: StartedBrokers) -> None:
    """The cell's consumers close (the durable stays on the server); what was published meanwhile reaches the next
    consumers of the group, and nothing comes twice."""
    cell = spec({"durable": True})

    async def scenario() -> tuple[list[int], list[int]]:
        producer = driver(server, cell)
        first, again = Received(), Received()
        consumer = driver(server, cell)
        await consumer.open_consumer("c", first)
        await send(producer, range(10))
        await until(lambda: len(first.sequences) == 10)
        await consumer.close()
        await send(producer, range(10, 15))
        restarted = driver(server, cell)
        await restarted.open_consumer("c", again)
        await until(lambda: len(again.sequences) == 5)
        await asyncio.sleep(0.2)  # nothing else may come
        await restarted.close()
        await producer.close()
        return first.sequences, again.sequences

    first, again = asyncio.run(scenario())
    assert first == list(range(1, 11))
    assert again == list(range(11, 16))


def test_a_message_over_the_server_s_limit_is_refused_not_sent(server: StartedBrokers) -> None:
    async def scenario() -> dict[int, str]:
        d = driver(server, spec())
        (conn,) = await d.open_producer("p", 1)
        refused = await d.send_batch(conn, iter([(0, 0, b"x" * (2 << 20))]), lambda *_: None)
        await d.close()
        return refused

    assert asyncio.run(scenario()) == {0: "MaxPayloadError"}


def test_an_external_server_says_what_it_runs(server: StartedBrokers) -> None:
    """`brokers: external`: the cell reaches the server with the matrix's cluster id and records its NATS version."""
    external = StanCell.model_validate(
        {
            "system": "stan",
            "version": "external",
            "brokers": "external",
            "connection": "my_stan",
            "broker": {"cluster_id": server.client["cluster_id"]},
            "workload": {"message_size_bytes": 64, "rate_per_s": 50, "measure_s": 1},
            "measurement": "e2e",
        }
    )
    login = {k: server.client[k] for k in ("user", "password")}  # what its connection would give
    info = system("stan").ask_version(server.address, login, external)
    assert info["nats_server"] == server.context["nats_server"].lstrip("v")
    assert (info["cluster_id"], info["streaming_protocol"]) == ("driver-itest", 1)


def test_acks_a_closed_connection_could_not_send_are_counted(
    server: StartedBrokers, caplog: pytest.LogCaptureFixture
) -> None:
    """The consumer's NATS connection closes while a read's deliveries wait for their Acks: its close starts one
    turn of the event loop after their bytes arrived, once nats-py parsed them and before the batch is handed over
    and acknowledged. The batch still reaches the harness; its Acks cannot be sent, and that is counted as a client
    error (the server delivers those messages again after ack_wait_s)."""

    async def scenario() -> tuple[Received, dict[str, Any]]:
        consumer, producer = driver(server, spec()), driver(server, spec())
        loop = asyncio.get_running_loop()
        closing: list[asyncio.Task[None]] = []
        armed = [False]

        def arrived() -> None:
            if armed[0] and not closing:
                nc = consumer.connections[0].nc
                loop.call_soon(lambda: closing.append(loop.create_task(nc.close())))

        consumer.watch_arrivals(arrived)
        got = Received()
        await consumer.open_consumer("c", got)
        (conn,) = await producer.open_producer("p", 1)
        armed[0] = True
        assert await producer.send_batch(conn, ((s, 0, b"m%03d" % s) for s in range(20)), lambda *_: None) == {}
        await until(lambda: bool(got.sequences) and bool(closing) and closing[0].done())
        errors = consumer.errors.summary()
        await producer.close()
        await consumer.close()
        return got, errors

    got, errors = asyncio.run(scenario())
    assert got.sequences, "no delivery reached the consumer before its connection closed"
    assert errors["kinds"].get("ack_failed", 0) >= 1, errors
    assert "Acks on sixnines.itest not sent: ConnectionClosedError" in caplog.text  # the first of a kind is logged


def test_connections_lost_with_the_server_are_closed_and_forgotten(server: StartedBrokers) -> None:
    """The server is killed: once nats-py gave up reconnecting (5 tries, 0.5 s apart), the consumer's and the
    producer's streaming connections are counted lost, closed, and no longer held by the driver; a send on the
    lost producer is refused as lost, and the consumer has no backlog to report."""

    async def scenario() -> None:
        d = driver(server, spec())
        await d.open_consumer("c", Received())
        (producer,) = await d.open_producer("p", 1)
        held = list(d.connections)
        assert len(held) == 2
        server.nodes.kill(0)
        await until(lambda: not d.connections and all(c.closed for c in held), 15)
        assert d.connections == [] and all(c.closed and c.nc.is_closed for c in held)
        assert d.errors.kinds.get("connection_lost") == 2, d.errors.summary()
        assert await d.send_batch(producer, iter([(0, 0, b"late")]), lambda *_: None) == {0: "StreamingConnectionLost"}
        assert d.backlog() is None
        await d.close()

    asyncio.run(scenario())
