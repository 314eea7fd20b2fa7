"""The worker contract's pure parts (docs/workers.md): the plan, events, sample files, pauses and their verdict."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from bench_tasks.core.pauses import UNEXPLAINED, Pause, summarize_pauses
from bench_tasks.core.saturation import ProcessWatch, ThreadTimes, verdict
from bench_tasks.core.schedule import PhasePlan
from bench_tasks.jvm import safepoints
from bench_tasks.lake.records import RECEIVED_SCHEMA, SENT_SCHEMA
from bench_tasks.load import rawfiles
from bench_tasks.load.contract import ContractError, WorkerProgram, decode_event, plan_keys, write_plan

PROGRAM = WorkerProgram(("java", "-Dx={scratch}/y"), "chronicle", {"chronicle.wait": "busy"})


def keys(**overrides: object) -> dict[str, str]:
    args: dict = {
        "role": "consumer",
        "index": 0,
        "name": "consumer c0",
        "cell_id": "abc",
        "address": "/dev/shm/q",
        "route": "",
        "names": "abc",
        "measurement": "e2e",
        "message_size_bytes": 512,
        "phase_ns": (1, 2, 3),
        "max_schedule_lag_ms": 100.0,
        "report_every_ms": 250,
        "scratch": Path("/tmp/s"),
        "program": PROGRAM,
    }
    return plan_keys(**{**args, **overrides})


def read_properties(path: Path) -> dict[str, str]:
    """The subset of java.util.Properties' syntax write_plan produces: key=value, backslash escapes."""
    out = {}
    for line in path.read_text().splitlines():
        key, _, value = line.partition("=")
        out[key] = value.replace("\\n", "\n").replace("\\\\", "\\")
    return out


def test_the_plan_carries_every_contract_key_and_the_systems(tmp_path: Path) -> None:
    plan = read_properties(write_plan(keys(), tmp_path / "plan.properties"))
    assert plan["contract_version"] == "1" and plan["role"] == "consumer" and plan["name"] == "consumer c0"
    assert (plan["warmup_ns"], plan["measure_ns"], plan["cooldown_ns"]) == ("1", "2", "3")
    assert plan["transport"] == "chronicle" and plan["chronicle.wait"] == "busy" and plan["wait"] == "park"


def test_the_plan_refuses_an_unknown_role_and_settings_that_replace_its_keys() -> None:
    with pytest.raises(ContractError, match="responder"):
        keys(role="responder")
    clashing = WorkerProgram(("java",), "chronicle", {"route": "x"})
    with pytest.raises(ContractError, match="route"):
        keys(program=clashing)


def test_the_command_gets_the_scratch_folder_and_the_plan_last() -> None:
    assert PROGRAM.command(Path("/s"), Path("/s/plan")) == ["java", "-Dx=/s/y", "/s/plan"]


def test_events_are_json_lines_of_known_kinds_and_anything_else_is_log() -> None:
    event = decode_event('{"kind":"progress","role":"consumer","index":0,"received":3,"e2e_intended_ns":[1,2,3]}')
    assert event is not None and event["received"] == 3
    assert isinstance(event["e2e_intended_ns"], np.ndarray) and event["e2e_intended_ns"].dtype == np.int64
    assert decode_event("SLF4J(W): No SLF4J providers were found.") is None
    assert decode_event('{"kind":"banner"}') is None
    with pytest.raises(ContractError, match="index"):
        decode_event('{"kind":"ready","role":"producer"}')


def write_raw(path: Path, kind: str, rows: list[list[int]], declared: int | None = None) -> Path:
    columns = rawfiles.COLUMNS[kind]
    header = {"format": "sixnines-raw", "version": 1, "kind": kind, "rows": declared or len(rows), "columns": columns}
    with path.open("wb") as f:
        f.write(json.dumps(header).encode() + b"\n")
        f.write(np.asarray(rows, dtype="<i8").tobytes())
    return path


def test_a_sent_file_becomes_the_lakes_sent_table_value_for_value(tmp_path: Path) -> None:
    plan = PhasePlan(1000, 100, 100, 100)
    raw = write_raw(tmp_path / "sent-p0.s9raw", "sent", [[0, 1000, 1001, 1005, -1, 7], [1, 1150, -1, -1, -1, -1]])
    (tmp_path / "sent-p0.errors").write_text("1\tIllegalStateException: closed\n")
    assert rawfiles.convert(raw, tmp_path / "sent-p0.parquet", 3, plan) == 2
    table = pq.read_table(tmp_path / "sent-p0.parquet")
    assert table.schema.equals(SENT_SCHEMA, check_metadata=False)
    assert table["producer_id"].to_pylist() == [3, 3]
    assert table["sent_ns"].to_pylist() == [1001, None] and table["acked_ns"].to_pylist() == [1005, None]
    assert table["partition"].to_pylist() == [None, None] and table["offset"].to_pylist() == [7, None]
    assert table["phase"].to_pylist() == ["warmup", "measure"]
    assert table["error"].to_pylist() == [None, "IllegalStateException: closed"]


def test_a_received_file_becomes_the_lakes_received_table(tmp_path: Path) -> None:
    plan = PhasePlan(1000, 100, 100, 100)
    rows = [[0, 5, 1250, 1251, 1260, -1, 42, 2, 1255, 1256]]
    raw = write_raw(tmp_path / "received-c1.s9raw", "received", rows)
    rawfiles.convert(raw, tmp_path / "received-c1.parquet", 1, plan)
    table = pq.read_table(tmp_path / "received-c1.parquet")
    assert table.schema.equals(RECEIVED_SCHEMA, check_metadata=False)
    row = table.to_pylist()[0]
    assert row["consumer_id"] == 1 and row["received_ns"] == 1260 and row["offset"] == 42 and row["hop"] == 2
    assert row["relay_received_ns"] == 1255 and row["partition"] is None and row["phase"] == "cooldown"


def test_a_sample_file_cut_short_is_refused_by_name(tmp_path: Path) -> None:
    raw = write_raw(tmp_path / "sent-p0.s9raw", "sent", [[0, 1, 2, 3, -1, 4]], declared=2)
    with pytest.raises(ContractError, match=r"sent-p0\.s9raw.*cut short"):
        rawfiles.read_raw(raw)


def test_safepoints_are_read_from_the_jvms_log_on_the_monotonic_clock() -> None:
    log = (
        '[5000000000ns] Safepoint "G1CollectForAllocation", Time since last: 1 ns, Reaching safepoint: 2 ns, '
        "At safepoint: 3 ns, Total: 30000000 ns\n[5000000001ns] something else\n"
    )
    assert safepoints.parse(log) == [Pause(4_970_000_000, 30_000_000, "a JVM safepoint (G1CollectForAllocation)")]


def test_pauses_in_the_measure_phase_are_summarised_with_their_cause() -> None:
    window = (1_000, 10_000_000_000)
    hiccups = [[500, 5_000_000], [2_000_000_000, 40_000_000], [3_000_000_000, 2_000_000]]
    explained = [Pause(1_995_000_000, 44_000_000, "a JVM safepoint (G1CollectForAllocation)")]
    s = summarize_pauses(hiccups, explained, window)
    assert s["count"] == 2 and s["max_ms"] == 40.0 and s["total_ms"] == 42.0 and s["max_at_ns"] == 2_000_000_000
    assert s["max_cause"] == "a JVM safepoint (G1CollectForAllocation)"
    assert summarize_pauses(hiccups, [], window)["max_cause"] == UNEXPLAINED


def test_a_pause_a_declared_fault_put_on_a_worker_is_counted_apart_and_judges_nothing() -> None:
    """A relay stalled by its cell's declared fault measures that stall as a hiccup: it is the fault's, so the
    pause the verdict judges is the longest other one."""
    window = (0, 10_000_000_000)
    hiccups = [[1_999_000_000, 601_000_000], [5_000_000_000, 3_000_000]]
    declared = [Pause(2_000_000_000, 600_000_000, "a declared stall")]
    s = summarize_pauses(hiccups, [], window, declared)
    assert s["declared"] == {"count": 1, "max_ms": 601.0}
    assert s["count"] == 1 and s["max_ms"] == 3.0 and s["max_at_ns"] == 5_000_000_000
    assert "declared" not in summarize_pauses(hiccups, [], window)
    assert summarize_pauses(hiccups, [], window)["max_ms"] == 601.0


def test_a_worker_paused_past_the_limit_fails_the_cell_naming_it() -> None:
    paused = {"samples": 10, "threads": {}, "busy": 0.1, "pauses": {"count": 1, "max_ms": 1500.0, "max_at_ns": 3e9}}
    paused["pauses"]["max_cause"] = UNEXPLAINED
    reasons = verdict({"consumer c0": paused}, 100.0, ["consumer c0"], measure_start_ns=2_000_000_000)
    assert reasons == [
        "harness saturated: consumer c0 could not run for 1,500.0 ms at measure +1.000 s (stopped, throttled or "
        "starved of CPU; 1 pause(s) of 1 ms or more in the measure phase), over max_schedule_lag_ms=100"
    ]
    paused["pauses"]["max_ms"] = 50.0
    assert verdict({"consumer c0": paused}, 100.0, ["consumer c0"]) == []


def test_a_jvm_worker_is_busy_by_its_busiest_message_thread_and_a_spinning_thread_is_not_saturated() -> None:
    watch = ProcessWatch(read=dict, runtime="jvm", message_threads=("msg-",))
    for i, (spin_work, gc) in enumerate([(0, 0), (100_000_000, 990_000_000)]):
        watch.at_ns.append(i * 1_000_000_000)
        watch.threads.append({"msg-consume": ThreadTimes(spin_work, 0, 1), "G1 Conc#0": ThreadTimes(gc, 0, 1)})
        watch.cpu_ns.append(i * 1_000_000_000)
        watch.backlog.append(0)
        watch.handled.append(i * 1000)
    s = watch.summary((0, 2_000_000_000), 100.0)
    assert s["runtime"] == "jvm" and s["busy"] == 0.1
    assert verdict({"consumer c0": s}, 100.0, ["consumer c0"]) == []  # a GC thread's CPU is not the message path
