"""Accounting, metrics, hops and leaders from tiny literal raw rows with known answers."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from bench_tasks import RECEIVED_SCHEMA, SENT_SCHEMA, load_matrix
from bench_tasks.cell.runner import acked_metric as harness_acked_metric
from spark_jobs import lakeio
from spark_jobs.lakeio import spark_ddl
from spark_jobs.percentiles import compute
from spark_jobs.samples import cell_facts

REPO = Path(__file__).resolve().parents[2]
M = 1_000  # the measure phase is intended in [1000, 2000)


def _rows(table: pa.Table) -> list[Row]:
    """A table's rows with attribute access, as the tests read them."""
    return [Row(**row) for row in table.to_pylist()]


def _cells(spark: SparkSession, *rows: tuple[str, str, str]) -> DataFrame:
    """(cell_id, measurement, spec_json) rows of a cells table, the rest of the columns filler."""
    data = [
        ("r", "2026-01-02", c, f"s{c}", "nats", "2.15.1", meas, c, "ok", 0, M, 2 * M, 3 * M, spec)
        for c, meas, spec in rows
    ]
    return spark.createDataFrame(
        data,
        "run_id string, run_date string, cell_id string, series_key string, system string, version string, "
        "measurement string, label string, status string, t0_ns long, measure_start_ns long, measure_end_ns long, "
        "end_ns long, spec_json string",
    )


def _sent(spark: SparkSession, cell: str, rows: list[tuple]) -> DataFrame:
    """rows: (producer_id, seq, intended_ns, sent_ns, acked_ns, phase)."""
    full = [(("r", cell, p, s, i, sn, a, None, None, ph, None)) for p, s, i, sn, a, ph in rows]
    return spark.createDataFrame(full, f"run_id string, cell_id string, {spark_ddl(SENT_SCHEMA)}")


def _received(spark: SparkSession, cell: str, rows: list[tuple]) -> DataFrame:
    """rows: (producer_id, seq, intended_ns, sent_ns, received_ns, leader, hop, phase[, relay_received, relay_sent])."""
    full = []
    for p, s, i, sn, r, ld, h, ph, *relay in rows:
        relay_received, relay_sent = relay or (None, None)
        full.append(("r", cell, 0, p, s, i, sn, r, None, None, ld, h, relay_received, relay_sent, ph))
    return spark.createDataFrame(full, f"run_id string, cell_id string, {spark_ddl(RECEIVED_SCHEMA)}")


JETSTREAM = '{"system": "nats", "broker": {"mode": "jetstream"}, "workload": {"rate_per_s": 1000, "measure_s": 1}}'


def test_accounting_and_e2e_metrics(spark: SparkSession) -> None:
    """Five messages in measure: one lost after its ack, one received twice; warmup rows do not count."""
    sent = _sent(
        spark,
        "a",
        [
            (0, 0, 500, 510, 600, "warmup"),
            (0, 1, 1000, 1010, 1100, "measure"),
            (0, 2, 1200, 1210, 1300, "measure"),
            (0, 3, 1400, 1420, 1500, "measure"),  # acked, never received
            (0, 4, 1600, None, None, "measure"),  # the client refused it
            (0, 5, 1800, 1805, None, "measure"),  # never acked, received
        ],
    )
    received = _received(
        spark,
        "a",
        [
            (0, 0, 500, 510, 700, None, 0, "warmup"),
            (0, 1, 1000, 1010, 1150, None, 0, "measure"),
            (0, 2, 1200, 1210, 1290, None, 0, "measure"),
            (0, 2, 1200, 1210, 1250, None, 0, "measure"),  # the earlier receipt counts, the other is a duplicate
            (0, 5, 1800, 1805, 1900, None, 0, "measure"),
        ],
    )
    acc, pct = compute(sent, received, _cells(spark, ("a", "e2e", JETSTREAM)))
    a = _rows(acc)[0].asDict()
    assert {k: a[k] for k in ("scheduled", "sent", "send_errors", "acknowledged", "received")} == {
        "scheduled": 5,
        "sent": 4,
        "send_errors": 1,
        "acknowledged": 3,
        "received": 3,
    }
    assert (a["duplicated"], a["lost"], a["acknowledged_but_lost"]) == (1, 1, 1)
    rows = {(r.metric, r.basis): r for r in _rows(pct)}
    assert set(rows) == {("e2e", "intended"), ("e2e", "sent"), ("publish", "intended"), ("publish", "sent")}
    e2e = rows[("e2e", "intended")]
    assert (e2e["count"], e2e.min_ns, e2e.max_ns, e2e.p50_ns) == (3, 50, 150, 100)  # 150, 50, 100
    assert rows[("e2e", "sent")].max_ns == 140
    publish = rows[("publish", "sent")]
    assert (publish["count"], publish.min_ns, publish.max_ns) == (3, 80, 90)
    assert e2e.leader is None and e2e.lost == 1 and e2e.unsupported[0] == "90"


def test_service_chain_hops_are_metrics(spark: SparkSession) -> None:
    """A chain's final receipts carry the relay's times: `e2e` is the total, `hop1` ends at the relay's receipt,
    `hop2` starts there (response) or at the relay's send (service) — as bench_tasks.core.analysis computes them."""
    sent = _sent(spark, "h", [(0, s, 1000 + 100 * s, 1005 + 100 * s, None, "measure") for s in range(3)])
    # message s: relay got it 10 ns after intended, forwarded 4 ns later, final receipt 30 ns after intended
    final = [
        (0, s, 1000 + 100 * s, 1005 + 100 * s, 1030 + 100 * s, None, 2, "measure", 1010 + 100 * s, 1014 + 100 * s)
        for s in range(2)
    ]
    chain = '{"system": "nats", "broker": {"mode": "core"}}'
    acc, pct = compute(sent, _received(spark, "h", final), _cells(spark, ("h", "chain", chain)))
    rows = {(r.metric, r.basis): r for r in _rows(pct)}
    assert set(rows) == {(m, b) for m in ("e2e", "hop1", "hop2") for b in ("intended", "sent")}
    assert (rows[("e2e", "intended")]["count"], rows[("e2e", "intended")].max_ns) == (2, 30)
    assert (rows[("e2e", "sent")].max_ns, rows[("hop1", "intended")].max_ns, rows[("hop1", "sent")].max_ns) == (
        25,
        10,
        5,
    )
    assert (rows[("hop2", "intended")].max_ns, rows[("hop2", "sent")].max_ns) == (20, 16)
    a = _rows(acc)[0]
    assert (a.received, a.lost) == (2, 1)  # the third message never reached the end of the chain


def test_kafka_leader_breakdown(spark: SparkSession) -> None:
    """Receipts credited to leaders 1 and 2 give one overall row and one row per leader."""
    sent = _sent(spark, "k", [(0, s, 1000 + s, 1000 + s, 1000 + s + 5, "measure") for s in range(4)])
    received = _received(
        spark,
        "k",
        [(0, s, 1000 + s, 1000 + s, 1000 + s + 10 * (s + 1), 1 if s < 2 else 2, 0, "measure") for s in range(4)],
    )
    kafka = '{"system": "kafka", "client": {"producer": {"acks": "all"}}}'
    cells = _cells(spark, ("k", "e2e", kafka)).withColumn("system", F.lit("kafka"))
    _, pct = compute(sent, received, cells)
    rows = {(r.metric, r.leader): r for r in _rows(pct) if r.basis == "intended"}
    assert set(rows) == {("e2e", None), ("e2e", 1), ("e2e", 2), ("publish", None)}
    assert (rows[("e2e", 1)]["count"], rows[("e2e", 1)].max_ns) == (2, 20)
    assert (rows[("e2e", 2)]["count"], rows[("e2e", 2)].min_ns) == (2, 30)
    assert rows[("e2e", None)]["count"] == 4
    facts = cell_facts(cells).collect()[0]
    assert facts.delivery_guaranteed and facts.acked_metric == "publish"


def _matrix_cells() -> list:
    return [c for name in ("quick", "kafka_durability") for c in load_matrix(REPO / "matrices" / f"{name}.yaml").cells]


def _old_cells_table(cells: list) -> pa.Table:
    """A cells table as a harness wrote it before rows recorded acked_metric and delivery_guaranteed."""
    return pa.table(
        {
            "run_id": ["old-run"] * len(cells),
            "cell_id": [c.id for c in cells],
            "system": [c.spec.system for c in cells],
            "spec_json": [c.spec.model_dump_json() for c in cells],
        }
    )


def test_older_cells_rows_get_delivery_from_their_system(spark: SparkSession, tmp_path: Path) -> None:
    """A cells table landed before rows recorded what an ack means: read_cells asks each row's system with its
    spec and gets what landing would have recorded (bench_tasks.cell.runner.acked_metric) — core NATS no acks,
    rtt replies, the rest publish acks; delivery guaranteed for JetStream and Kafka acks=all only."""
    cells = _matrix_cells()
    run = lakeio.RunRef("old-run", "2026-01-02")
    path = lakeio.cells_path(tmp_path, run)
    path.parent.mkdir(parents=True)
    pq.write_table(_old_cells_table(cells), path)
    table = lakeio.read_cells(spark, tmp_path, [run]).toArrow()
    got = dict(zip(table["cell_id"].to_pylist(), table["acked_metric"].to_pylist(), strict=True))
    assert got == {c.id: harness_acked_metric(c) for c in cells}
    assert set(got.values()) >= {"publish", "rtt", None}
    guaranteed = dict(zip(table["cell_id"].to_pylist(), table["delivery_guaranteed"].to_pylist(), strict=True))
    specs = {c.id: c.spec.model_dump() for c in cells}
    expected = {
        cell_id: spec["broker"].get("mode") == "jetstream" or spec["client"].get("producer", {}).get("acks") == "all"
        for cell_id, spec in specs.items()
    }
    assert guaranteed == expected and set(expected.values()) == {True, False}
    durable = dict(zip(table["cell_id"].to_pylist(), table["durable_acks"].to_pylist(), strict=True))
    three = {cell_id: spec["broker"].get("replication_factor") == 3 for cell_id, spec in specs.items()}
    assert durable == three and set(three.values()) == {True, False}  # acks=all RF=3 min.isr=2 promises it


def test_recorded_delivery_is_what_the_jobs_use(spark: SparkSession) -> None:
    """What landing recorded wins over the spec: a core NATS row recorded as guaranteed with publish acks is
    analyzed so (the jobs read the fact as data, never decide it from a system's name)."""
    spec = '{"system": "nats", "broker": {"mode": "core"}, "workload": {"rate_per_s": 1000, "measure_s": 1}}'
    cells = _cells(spark, ("c", "e2e", spec)).select(
        "*", F.lit("publish").alias("acked_metric"), F.lit(True).alias("delivery_guaranteed")
    )
    facts = cell_facts(cells).collect()[0]
    assert (facts.acked_metric, facts.acked_code, facts.delivery_guaranteed) == ("publish", 1, True)
    unrecorded = cell_facts(_cells(spark, ("c", "e2e", spec))).collect()[0]
    assert (unrecorded.acked_metric, unrecorded.delivery_guaranteed) == (None, False)
