"""The RabbitMQ driver against a real node, without a cell: a connection the node never answers is closed when
its open times out; connections that closed (the broker's doing or the driver's) are no longer held; a stalled
node fills the publish window, past which sends are refused rather than buffered without limit; and a queue the
node refuses to delete is never reported deleted."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pika
import psutil
import pytest

from bench_tasks.errors import BrokerError, RoutesNotDeleted
from bench_tasks.systems.rabbitmq import access, connection
from bench_tasks.systems.rabbitmq import driver as rabbit
from bench_tasks.systems.rabbitmq.nodes import RabbitCluster
from bench_tasks.systems.rabbitmq.settings import RabbitmqBroker, RabbitmqCell

pytestmark = [pytest.mark.alongside, pytest.mark.usefixtures("no_orphans")]

PAYLOAD = b"x" * 4096


def _cell(measurement: str = "e2e", **client: Any) -> RabbitmqCell:
    return RabbitmqCell.model_validate(
        {
            "system": "rabbitmq",
            "version": "latest",
            "workload": {"message_size_bytes": len(PAYLOAD), "rate_per_s": 10, "measure_s": 1},
            "measurement": measurement,
            "client": client,
        }
    )


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RabbitCluster]:
    with RabbitCluster("latest", RabbitmqBroker(), tmp_path_factory.mktemp("rabbit")) as cluster:
        yield cluster


def _amqp_port(cluster: RabbitCluster) -> int:
    assert cluster.endpoint is not None
    return cluster.endpoint.nodes[0].amqp_port


def _sockets_to(port: int) -> list[Any]:
    """This process's TCP connections to `port` (a closed one is gone from the list)."""
    return [c for c in psutil.Process().net_connections("tcp") if c.raddr and c.raddr.port == port]


async def _until(check: Callable[[], object], timeout_s: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not check() and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.02)


def _messages(first: int, count: int) -> Iterator[tuple[int, int, bytes]]:
    return ((seq, 0, PAYLOAD) for seq in range(first, first + count))


def test_an_open_that_times_out_closes_its_connection(node: RabbitCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """A frozen node (SIGSTOP) still completes TCP connections and never answers AMQP's handshake: the open
    gives up after its timeout, naming it, and leaves no socket behind."""
    assert node.endpoint is not None
    monkeypatch.setattr(connection, "OPEN_TIMEOUT_S", 1.0)
    port = _amqp_port(node)

    async def scenario() -> None:
        node.pause(1)
        try:
            with pytest.raises(BrokerError, match="no answer within 1 s"):
                await asyncio.wait_for(rabbit.connect(node.endpoint.url, "frozen", {}, node.user.client()), 10)
            await _until(lambda: not _sockets_to(port), 2.0)
            assert not _sockets_to(port), _sockets_to(port)
        finally:
            node.resume(1)

    asyncio.run(scenario())


def test_closed_connections_are_forgotten(node: RabbitCluster) -> None:
    """The node closes a consumer's connection (it subscribes again on a new one) and a producer's channel (it
    reconnects and closes the old connection): the driver then holds only connections that are open."""
    assert node.endpoint is not None
    driver = rabbit.RabbitmqDriver(node.endpoint.url, _cell(), "forget", client=node.user.client())

    async def scenario() -> None:
        await driver.prepare()
        await driver.open_consumer("c0", lambda _one: None)
        (producer,) = await driver.open_producer("p0", 1)
        first = producer.conn
        producer.channel.basic_publish("no-such-exchange", "k", b"x")  # the node closes the channel: 404
        await _until(lambda: not producer.channel.is_open)
        await driver.send_batch(producer, _messages(0, 1), lambda *_: None)  # refused; reconnects
        await _until(lambda: producer.conn is not first and producer.channel.is_open and first.is_closed)
        assert producer.conn is not first and first.is_closed
        assert first not in driver.connections and len(driver.connections) == 3  # admin, consumer, producer
        held = list(driver.connections)
        assert node.ask(1, 'begin rabbit_networking:close_all_connections("test"), "ok" end') == "ok"
        await _until(lambda: all(c.is_closed for c in held) and len(driver.connections) == 1)
        (resubscribed,) = driver.connections  # the consumer's new connection; none of the closed ones
        assert resubscribed.is_open and resubscribed not in held
        await driver.cleanup()
        await driver.close()

    asyncio.run(scenario())


def test_a_batch_leaves_in_one_write_before_send_batch_returns(
    node: RabbitCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pika buffers each frame of a publish as a chunk of its own and sends them one by one when the loop next
    turns; the driver sends a whole batch at once, in one write, and the node takes and confirms all of it."""
    from pika.adapters.utils import io_services_utils as io

    assert node.endpoint is not None
    driver = rabbit.RabbitmqDriver(node.endpoint.url, _cell(), "one-write", client=node.user.client())
    writes: list[int] = []
    send = io._AsyncTransportBase._sigint_safe_send

    def counted(sock: Any, data: bytes) -> int:
        writes.append(len(data))
        return send(sock, data)

    acked: list[int] = []

    async def scenario() -> None:
        await driver.prepare()
        (producer,) = await driver.open_producer("p0", 1)
        monkeypatch.setattr(io._AsyncTransportBase, "_sigint_safe_send", staticmethod(counted))
        refused = await driver.send_batch(producer, _messages(0, 20), lambda seq, *_: acked.append(seq))
        assert refused == {} and producer.unwritten() == 0  # written before the loop turned
        assert len(writes) == 1 and writes[0] > 20 * len(PAYLOAD)  # 60 frames, one write
        await _until(lambda: len(acked) == 20)
        await driver.cleanup()
        await driver.close()

    asyncio.run(scenario())
    assert sorted(acked) == list(range(20))


@pytest.mark.parametrize("confirms", [True, False], ids=["unconfirmed", "unwritten"])
def test_a_stalled_node_fills_the_window_and_later_sends_are_refused(node: RabbitCluster, confirms: bool) -> None:
    """Frozen mid-send, the node takes nothing: with confirms, past `max_unconfirmed` publishes awaiting their
    confirm each send is refused; without, past `max_unwritten_bytes` held for the socket. Nothing is buffered
    beyond the cap, and once the node runs again sends are taken again."""
    assert node.endpoint is not None
    window, buffer = 2000, 1 << 20
    cell = _cell(confirms=confirms, max_unconfirmed=window, max_unwritten_bytes=buffer if not confirms else 1 << 30)
    driver = rabbit.RabbitmqDriver(node.endpoint.url, cell, f"stalled-{confirms}", client=node.user.client())
    acked: list[int] = []

    def on_ack(seq: int, _partition: int | None, _offset: int | None, error: str | None) -> None:
        if error is None:
            acked.append(seq)

    async def scenario() -> None:
        await driver.prepare()
        (producer,) = await driver.open_producer("p0", 1)
        node.pause(1)
        try:
            refused: dict[int, str] = {}
            for batch in range(40):  # 160 MB offered: far more than the socket buffers take
                refused |= await driver.send_batch(producer, _messages(batch * 1000, 1000), on_ack)
                await asyncio.sleep(0.01)  # pika writes what the socket takes
            pending = len(producer.confirms.pending) if confirms else 0
            unwritten = producer.conn._transport.get_write_buffer_size()
        finally:
            node.resume(1)
        print(f"\nrefused {len(refused)}, awaiting confirm {pending}, unwritten {unwritten} B")
        assert set(refused.values()) == {"ConfirmWindowFull" if confirms else "WriteBufferFull"}
        assert len(refused) > 30_000
        if confirms:
            assert pending == window
        else:
            assert unwritten <= buffer + len(PAYLOAD) + 200  # the last publish's frame may cross the cap
        await _until(lambda: producer.conn._transport.get_write_buffer_size() == 0, 30)
        if confirms:
            await _until(lambda: not producer.confirms.pending, 30)
            assert len(acked) == window
        assert await driver.send_batch(producer, _messages(10**6, 10), on_ack) == {}
        await driver.cleanup()
        await driver.close()

    asyncio.run(scenario())


def test_a_queue_the_node_will_not_delete_is_not_reported_deleted(node: RabbitCluster) -> None:
    """A chain cell's two queues; another connection holds the second one exclusively and stays open, so the node
    refuses to delete it (405 RESOURCE_LOCKED, closing the deleting channel). Only the queue the node confirmed
    deleted is reported; the other is named with the node's reason, and is still there."""
    assert node.endpoint is not None
    cell, names = _cell("chain"), "locked"
    first, locked = access.route_names(cell, names)
    holder = pika.BlockingConnection(pika.URLParameters(node.user.url(node.endpoint.nodes[0].amqp_url)))
    try:
        channel = holder.channel()
        channel.queue_declare(first)
        channel.queue_declare(locked, exclusive=True)
        with pytest.raises(RoutesNotDeleted) as refused:
            access.delete_routes(node.endpoint.url, node.user.client(), cell, names)
        assert refused.value.deleted == [first]
        assert list(refused.value.failed) == [locked] and "RESOURCE_LOCKED" in refused.value.failed[locked]
        assert channel.queue_declare(locked, passive=True).method.queue == locked  # still the holder's
    finally:
        holder.close()
