"""The Airflow-free pieces of the detached lifecycle: cell preparation, broker identity, the comparison of
versions, tables rebuilt from a landed row, and the watchers' log line and summary — on literal inputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench_tasks.cell.lifecycle import broker_key, prepare_cell
from bench_tasks.cell.tables import percentile_table, report_from_row
from bench_tasks.cell.watch import phase_summary, progress_line
from bench_tasks.cell.work import CellWork
from bench_tasks.core.compare import compare_versions, format_comparison
from bench_tasks.errors import CellError, MatrixError
from bench_tasks.spec.matrix import parse_matrix
from bench_tasks.systems import system

NATS_LATEST, NATS_OLDER = system("nats").versions[:2]


def cells(**axes: list) -> list:
    raw = {
        "name": "unit",
        "systems": [{"system": "nats", "versions": ["latest"], "broker": {"mode": "core"}}],
        "workload": {"message_size_bytes": 64, "rate_per_s": 100, "warmup_s": 2, "measure_s": 10, "cooldown_s": 1},
        "measurements": ["e2e"],
        "axes": axes,
    }
    return parse_matrix(raw, "unit.yaml").cells


def test_prepare_resolves_latest_and_scales_phases_into_a_new_cell() -> None:
    (base,) = cells()
    same = prepare_cell(base)
    assert same.spec.version == NATS_LATEST and same.spec.workload.measure_s == 10
    scaled = prepare_cell(base, phase_scale=0.25)
    w = scaled.spec.workload
    assert (w.warmup_s, w.measure_s, w.cooldown_s) == (0.5, 2.5, 0.25)
    assert scaled.id != same.id and scaled.series_key != same.series_key  # a shorter cell is another cell


def test_prepare_overrides_only_the_named_system() -> None:
    (base,) = cells()
    older = prepare_cell(base, {"nats": NATS_OLDER})
    assert older.spec.version == NATS_OLDER
    assert older.series_key == prepare_cell(base).series_key  # same series, another version
    assert prepare_cell(base, {"kafka": "4.3.1"}).spec.version == NATS_LATEST


def test_prepare_rejects_an_unknown_version_naming_the_field() -> None:
    (base,) = cells()
    with pytest.raises(MatrixError, match=r"version: Value error, unknown nats version"):
        prepare_cell(base, {"nats": "0.0.1"})
    with pytest.raises(MatrixError, match="phase_scale"):
        prepare_cell(base, phase_scale=0)


def test_broker_key_ignores_the_workload_but_not_the_broker() -> None:
    a, b = cells(**{"workload.rate_per_s": [100, 200]})
    assert broker_key(a) == broker_key(b)
    core, jetstream = cells(**{"broker.mode": ["core", "jetstream"]})
    assert broker_key(core) != broker_key(jetstream)


def test_cell_work_reads_missing_files_as_none(tmp_path: Path) -> None:
    work = CellWork(tmp_path)
    assert work.read(work.status) is None
    with pytest.raises(CellError, match="no provisioned cell"):
        work.cell()


def summary(p50: int, p99: int, count: int = 1000) -> dict:
    pct = {"50": p50, "90": p50, "99": p99, "99.9": p99 * 2, "99.99": None, "99.999": None, "99.9999": None}
    return {"count": count, "min_ns": 1, "max_ns": p99 * 3, "mean_ns": 1.0, "stddev_ns": 1.0, "percentiles_ns": pct}


def row(version: str, status: str, p50: int, series: str = "s1") -> dict:
    results = {
        "accounting": dict.fromkeys(
            ("scheduled", "sent", "send_errors", "acknowledged", "received", "duplicated", "lost"), 1000
        )
        | {"acknowledged_but_lost": 0},
        "metrics": {"e2e": {"intended": summary(p50, 4 * p50), "sent": summary(p50 // 2, 2 * p50)}},
        "generator": {"schedule_lag": summary(10, 20), "target_rate_per_s": 100.0, "achieved_rate_per_s": 100.0},
    }
    results["accounting_all_phases"] = results["accounting"]
    return {
        "series_key": series,
        "version": version,
        "status": status,
        "cell_id": f"{series}-{version}",
        "label": f"nats/core {version} e2e 64B @100/s p1 c1",
        "results_json": json.dumps(results),
    }


def test_compare_pairs_versions_by_series_in_the_given_order() -> None:
    rows = [row("2.15.1", "ok", 2_000_000), row("2.10.26", "ok", 1_000_000), row("2.10.26", "ok", 5, "other")]
    entries = compare_versions(rows, ["2.10.26", "2.15.1"])
    e2e = [e for e in entries if e["series_key"] == "s1" and e["basis"] == "intended"]
    (entry,) = e2e
    assert list(entry["versions"]) == ["2.10.26", "2.15.1"]
    assert entry["versions"]["2.10.26"]["50"] == 1.0 and entry["versions"]["2.15.1"]["50"] == 2.0
    assert entry["change_pct"]["50"] == 100.0 and entry["change_pct"]["max"] == 100.0
    assert entry["label"] == "nats/core e2e 64B @100/s p1 c1"
    other = next(e for e in entries if e["series_key"] == "other")
    assert other["versions"]["2.15.1"] == {"status": "missing"} and other["change_pct"] == {}
    text = format_comparison(entries, ["2.10.26", "2.15.1"])
    assert "+100.0%" in text and "missing" in text


def test_a_failed_version_is_shown_but_not_compared() -> None:
    entries = compare_versions([row("a", "ok", 10), row("b", "failed", 20)], ["a", "b"])
    assert all(e["change_pct"] == {} for e in entries)
    assert entries[0]["versions"]["b"]["status"] == "failed"


def test_tables_rebuilt_from_a_landed_row() -> None:
    (cell,) = cells()
    literal = row(NATS_LATEST, "ok", 1_500_000)
    landed = {
        **literal,
        "cell_id": cell.id,
        "series_key": cell.series_key,
        "matrix": "unit",
        "reason": None,
        "spec_json": cell.spec.model_dump_json(),
        "faults_json": "[]",
    }
    report = report_from_row(landed)
    assert report.analysis is not None and report.analysis.metrics["e2e"]["intended"].percentiles["50"] == 1_500_000
    assert report.analysis.accounting.received == 1000
    table = percentile_table(report)
    assert [c.header for c in table.columns][:3] == ["metric", "count", "p50"]
    assert table.row_count == 3  # e2e resp, e2e svc, send lag


STATUS = {
    "cell_id": "abc",
    "state": "running",
    "phase": "measure",
    "elapsed_s": 3.0,
    "total_s": 13.0,
    "sent": 3000,
    "received": 2999,
    "sent_per_s": 1000.0,
    "received_per_s": 999.0,
    "metric": "e2e",
    "latency_ns": {"50": 400_000, "99": 1_000_000, "99.9": None},
    "max_ns": 2_000_000,
    "lag_ns": {"99.9": 150_000},
    "t0_ns": 100,
    "phases": {"warmup": [100, 200], "measure": [200, 300], "cooldown": [300, 400]},
    "phase_lag_ns": {"measure": {"count": 3000, "99.9": 250_000, "max": 900_000}},
}


def test_progress_line_and_phase_summary() -> None:
    line = progress_line(STATUS, "measure")
    assert "sent 3000 (1000/s)" in line and "p50 0.400" in line and "p99.9 -" in line and "lag p99.9 0.150" in line
    assert "waiting" in progress_line(None, "warmup")
    s = phase_summary(STATUS, "measure")
    assert (s["start_ns"], s["end_ns"], s["send_lag_p999_ms"], s["send_lag_max_ms"]) == (200, 300, 0.25, 0.9)
    assert phase_summary(STATUS, "warmup")["send_lag_p999_ms"] is None


def test_only_a_sustained_lag_means_the_generator_fell_behind() -> None:
    from bench_tasks.cell.watch import SUSTAINED_S, _Behind

    (cell,) = cells()  # max_schedule_lag_ms defaults to 100

    def status(at: int, lag_ms: float, phase: str = "measure") -> dict:
        return {"updated_ns": at, "phase": phase, "lag_ns": {"99.9": int(lag_ms * 1e6)}}

    behind = _Behind(cell)
    assert behind.check(status(1, 500, "warmup")) is None  # warmup is not gated
    assert [behind.check(status(t, 150)) for t in (2, 2, 3)] == [None, None, None]  # a repeated status counts once
    assert behind.check(status(4, 50)) is None  # back on schedule: the count starts again
    verdicts = [behind.check(status(t, 120 + t)) for t in range(5, 5 + SUSTAINED_S)]
    assert verdicts[:-1] == [None] * (SUSTAINED_S - 1)
    assert (
        verdicts[-1] is not None and f"for {SUSTAINED_S} s in a row" in verdicts[-1] and "worst 127.00" in verdicts[-1]
    )
    (rtt,) = cells()
    rtt = rtt.model_copy(update={"spec": rtt.spec.model_copy(update={"measurement": "rtt"})})
    exempt = _Behind(rtt)
    assert all(exempt.check(status(t, 900)) is None for t in range(10))


def test_a_reused_cluster_is_watched_on_the_new_cells_topic_or_stream() -> None:
    """Faults and leader watches of a reused cluster follow the cell that now uses it, not the one that started it."""
    from bench_tasks.brokers.provision import reuse_for
    from bench_tasks.systems.kafka.driver import topic_for
    from bench_tasks.systems.nats.driver import stream_for

    raw = {
        "name": "unit",
        "systems": [
            {"system": "nats", "versions": ["latest"], "broker": {"mode": "jetstream", "servers": 3, "replicas": 3}},
            {"system": "kafka", "versions": ["latest"]},
        ],
        "workload": {"message_size_bytes": 64, "rate_per_s": 100, "warmup_s": 2, "measure_s": 10, "cooldown_s": 1},
        "measurements": ["e2e"],
    }
    nats_cell, kafka_cell = sorted(parse_matrix(raw, "unit.yaml").cells, key=lambda c: c.spec.system, reverse=True)
    monitors = {"1": "http://127.0.0.1:1"}
    started_by_another = {"address": "a", "leader": {"monitors": monitors, "stream": "SIXNINES_other"}}
    mine = stream_for(nats_cell.instance, "")
    assert reuse_for(nats_cell, started_by_another)["leader"] == {"monitors": monitors, "stream": mine}
    assert reuse_for(kafka_cell, {"leader": {"topic": "other"}})["leader"] == {
        "topic": topic_for(kafka_cell.instance, "")
    }
    (single,) = cells()
    assert reuse_for(single, {"address": "a", "leader": None}) == {"address": "a", "leader": None}
