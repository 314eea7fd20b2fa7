"""Which settings promise that no acknowledged message is lost to one node's fault: each system declares it
(`System.promises_no_acknowledged_loss`), landing records it in the cells row as `durable_acks`, and the Spark
gate refuses a fault row of such a cell that cost an acknowledged message."""

from __future__ import annotations

from pathlib import Path

from bench_tasks.spec.matrix import load_matrix
from bench_tasks.systems import system_of

REPO = Path(__file__).resolve().parents[2]


def promises(spec: dict) -> bool:
    return system_of(spec).promises_no_acknowledged_loss(spec)


def kafka(acks: str, rf: int, min_isr: int, **broker: object) -> dict:
    return {
        "system": "kafka",
        "broker": {"brokers": 3, "replication_factor": rf, "min_insync_replicas": min_isr, **broker},
        "client": {"producer": {"acks": acks}},
    }


def test_kafka_promises_it_for_acks_all_on_three_replicas_with_two_in_sync() -> None:
    assert promises(kafka("all", 3, 2)) and promises(kafka("-1", 3, 3))
    assert not promises(kafka("1", 3, 2))  # the leader's ack alone dies with the leader
    assert not promises(kafka("all", 3, 1))  # one in-sync replica may be all there is
    assert not promises(kafka("all", 1, 1))
    assert promises(kafka("all", 3, 1, topic={"min.insync.replicas": "2"}))  # the topic's config is what applies
    assert not promises(kafka("all", 3, 2, server={"unclean.leader.election.enable": "true"}))


def test_jetstream_promises_it_for_a_replicated_file_stream_only() -> None:
    r3 = {"mode": "jetstream", "servers": 3, "replicas": 3, "storage": "file"}
    assert promises({"system": "nats", "broker": r3})
    assert not promises({"system": "nats", "broker": r3 | {"storage": "memory"}})
    assert not promises({"system": "nats", "broker": r3 | {"replicas": 1}})
    assert not promises({"system": "nats", "broker": {"mode": "core"}})


def test_rabbitmq_promises_it_for_a_quorum_queue_of_three_with_confirms_and_manual_acks() -> None:
    broker = {"nodes": 3, "queue_type": "quorum", "replicas": 3}
    client = {"confirms": True, "acks": "manual"}
    assert promises({"system": "rabbitmq", "broker": broker, "client": client})
    assert not promises({"system": "rabbitmq", "broker": broker, "client": client | {"acks": "auto"}})
    assert not promises({"system": "rabbitmq", "broker": broker, "client": client | {"confirms": False}})
    assert not promises({"system": "rabbitmq", "broker": broker | {"queue_type": "classic"}, "client": client})
    assert not promises({"system": "rabbitmq", "broker": broker | {"replicas": 1}, "client": client})


def test_single_copies_promise_nothing() -> None:
    assert not promises({"system": "stan", "broker": {"store": "file", "file_sync": True}})
    assert not promises({"system": "redis", "broker": {"mode": "streams", "replicas": 2, "appendonly": True}})


def test_the_fault_matrix_cells_promise_it() -> None:
    """matrices/faults.yaml's JetStream R3 and Kafka RF=3 acks=all cells are held to no acknowledged loss."""
    cells = load_matrix(REPO / "matrices" / "faults.yaml").cells
    assert cells and all(promises(c.spec.model_dump(mode="json")) for c in cells)


def test_rabbitmq_holds_confirmed_messages_to_no_loss_and_fire_and_forget_to_none() -> None:
    """`delivery_guaranteed` (the gate's no-loss rule while every node runs): a publisher confirm means the message
    is in its queue, whatever the queue type; without confirms nothing was promised."""
    rabbit = system_of({"system": "rabbitmq"})
    assert rabbit.delivery_guaranteed({"broker": {"queue_type": "classic", "durable": False}, "client": {}})
    assert not rabbit.delivery_guaranteed({"broker": {"queue_type": "classic"}, "client": {"confirms": False}})
