"""The RabbitMQ driver's bookkeeping that needs no broker: publisher confirms mapped back to the generator's
sequence numbers, and the queue each route declares."""

from __future__ import annotations

from types import SimpleNamespace

from bench_tasks.systems.rabbitmq.confirms import Confirms
from bench_tasks.systems.rabbitmq.driver import queue_arguments, queue_for
from bench_tasks.systems.rabbitmq.settings import RabbitmqBroker, RabbitmqCell


def frame(name: str, tag: int, multiple: bool) -> SimpleNamespace:
    return SimpleNamespace(method=SimpleNamespace(NAME=name, delivery_tag=tag, multiple=multiple))


def test_confirms_map_delivery_tags_to_seqs_single_multiple_and_nack() -> None:
    acked: list[tuple[int, int | None, str | None]] = []
    confirms = Confirms(partition=0)
    for seq in (10, 11, 12, 13, 14):
        confirms.sent(seq, lambda s, p, _o, e: acked.append((s, p, e)))
    confirms.settle(frame("Basic.Ack", 2, multiple=False))  # tag 2 = seq 11, out of order
    confirms.settle(frame("Basic.Ack", 3, multiple=True))  # tags 1 and 3 (2 already settled)
    confirms.settle(frame("Basic.Nack", 4, multiple=False))
    assert acked == [(11, 0, None), (10, 0, None), (12, 0, None), (13, None, "nack")]
    assert confirms.low == 5
    confirms.fail_all("channel closed: node down")
    assert acked[-1] == (14, None, "channel closed: node down") and not confirms.pending


def test_each_route_declares_its_own_queue_with_the_cells_type() -> None:
    cell = RabbitmqCell.model_validate(
        {
            "system": "rabbitmq",
            "version": "latest",
            "workload": {"message_size_bytes": 256, "rate_per_s": 10, "measure_s": 1},
            "measurement": "e2e",
            "broker": RabbitmqBroker(nodes=3, queue_type="quorum", queue={"x-max-length": 10}).model_dump(),
        }
    )
    assert queue_for("abc", "hop2") == "sixnines.abc.hop2" and queue_for("abc") == "sixnines.abc"
    assert queue_arguments(cell) == {"x-queue-type": "quorum", "x-quorum-initial-group-size": 3, "x-max-length": 10}


def test_an_airflow_connection_becomes_amqp_urls_without_secrets() -> None:
    from bench_tasks.brokers.connections import BrokerConnection
    from bench_tasks.systems.rabbitmq.access import client_access

    plain = client_access(BrokerConnection("c", "amqp", "rmq-1,rmq-2:5673", 5672, "bench", "s3cret", "perf/1"))
    assert plain.address == "amqp://rmq-1:5672/perf%2F1,amqp://rmq-2:5673/perf%2F1"
    assert plain.client == {"username": "bench", "password": "s3cret"} and "s3cret" not in str(plain.described)
    tls = client_access(BrokerConnection("c", "amqp", "rmq", extra={"tls_ca_file": "/ca.pem"}))
    assert tls.address == "amqps://rmq:5671/%2F" and tls.client == {"tls_ca_file": "/ca.pem"}
    assert tls.described["auth"] == "none"
