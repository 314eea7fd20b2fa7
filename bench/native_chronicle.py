"""The Chronicle row of bench/native_compare.py: JLBH (Chronicle's own latency harness) beside sixnines' `chronicle`
e2e, one hop through a Chronicle Queue on the same settings, in alternating trials on one queue root.

Both sides: 512 B at `RATE`/s on tmpfs, roll cycle `ROLL_CYCLE`, tailers waiting by `WAIT` (Pauser.balanced), the
same chronicle-queue release's jars and JVM flags. JLBH (jvm/jlbh, built into the cache like the worker) runs the
writer and the tailer as two threads of one JVM, sending on its own busy-waited schedule; sixnines runs them as two
worker JVMs (producer, consumer) driven by the harness. Each side stamps the send right before the append and the
receipt once the message is copied out of the tailer, so "from sent" is the same quantity on both; JLBH's end to end
(corrected for coordinated omission: from its intended start) sits beside sixnines' e2e from intended.

    .venv/bin/python bench/native_compare.py --rows chronicle_jlbh_512b --trials 5 --measure 10
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from bench.trials import summarize_trials, trial_ratios
from bench_tasks import Cell, java, parse_matrix, program_jar, select_cells
from bench_tasks.systems.chronicle import CHRONICLE, JAVA17_FLAGS, QUIET_FLAGS

SIZE, RATE = 512, 10_000
ROLL_CYCLE, WAIT = "FAST_HOURLY", "pauser"
WARMUP_S = 2.0  # JIT warm-up on both sides: 20,000 messages before the measured ones
LAG_LIMIT_MS = 5.0
TARGET = 1.5  # sixnines from sent within 1.5x JLBH at p50 and p99, the median of the trials
JLBH_SOURCE = Path(__file__).resolve().parents[1] / "jvm" / "jlbh"
JLBH_JAR, JLBH_MAIN = "sixnines-jlbh.jar", "sixnines.jlbh.QueueHop"
JLBH_PERCENTILES = {"50": "PERCENTILE_50TH", "99": "PERCENTILE_99TH", "99.9": "PERCENTILE_99_9TH", "max": "WORST"}
NOTES = (
    "JLBH 2026.2 (net.openhft:jlbh, Maven Central) runs one JVM: its own thread calls the task at each intended "
    "time (busy-waiting to it) and the task appends; a second thread tails with the same Pauser and samples. "
    "sixnines runs the producer and the consumer as two JVM worker processes (open loop, parking until 50 us "
    "before each intended time), the consumer tailing with the same Pauser. ratio: sixnines e2e from sent over "
    "JLBH's 'from sent' probe; ratio_from_intended: sixnines e2e from intended over JLBH's end to end (corrected "
    "for coordinated omission)."
)


def chronicle_cell(measure_s: float) -> Cell:
    """The sixnines side: one producer, one consumer, e2e, the row's queue settings."""
    raw = {
        "name": "native_chronicle",
        "systems": [
            {
                "system": "chronicle",
                "versions": ["latest"],
                "broker": {"storage": "tmpfs", "roll_cycle": ROLL_CYCLE, "wait": WAIT},
            }
        ],
        "workload": {
            "message_size_bytes": SIZE,
            "rate_per_s": RATE,
            "warmup_s": WARMUP_S,
            "measure_s": measure_s,
            "cooldown_s": 1,
            "max_schedule_lag_ms": LAG_LIMIT_MS,
        },
        "measurements": ["e2e"],
    }
    (cell,) = select_cells(parse_matrix(raw, "native_chronicle"))
    return cell


def jlbh(queue: Path, version: str, measure_s: float) -> dict[str, Any]:
    """One JLBH run on a fresh queue folder `queue`: its percentiles (ms) from sent and from its intended start."""
    classpath = f"{program_jar(JLBH_SOURCE, JLBH_JAR)}:{CHRONICLE.fetch_release(version)}/*"
    args = [queue, ROLL_CYCLE, "busy" if WAIT == "busy" else "pauser", SIZE, RATE, WARMUP_S, measure_s]
    cmd = [java(), *JAVA17_FLAGS, *QUIET_FLAGS, "-cp", classpath, JLBH_MAIN, *map(str, args)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120 + 4 * measure_s, stdin=subprocess.DEVNULL)
    if done.returncode != 0 or not done.stdout.strip():
        raise RuntimeError(f"JLBH exited {done.returncode}: {done.stderr.strip()[-800:]}")
    found = json.loads(done.stdout.strip().splitlines()[-1])
    sent, intended = found["from_sent_ns"], found["end_to_end_ns"]
    return {
        "tool": "JLBH 2026.2 (jvm/jlbh QueueHop)",
        "count": found["count"],
        **{("max_ms" if p == "max" else f"p{p}_ms"): _ms(sent.get(key)) for p, key in JLBH_PERCENTILES.items()},
        "end_to_end_ms": {p: _ms(intended.get(key)) for p, key in JLBH_PERCENTILES.items()},
        "aborted": "Aborting test" in done.stderr,
    }


def _ms(ns: int | None) -> float | None:
    return None if ns is None else round(ns / 1e6, 4)


def intended_ratios(trial: dict[str, Any]) -> dict[str, Any]:
    """One trial's ratios from intended: sixnines e2e from intended over JLBH's end to end."""
    theirs = {f"p{p}_ms": v for p, v in trial["native"]["end_to_end_ms"].items() if p != "max"}
    return trial_ratios(theirs, trial["sixnines"].get("e2e_from_intended_ms", {}), ("50", "99"))


def chronicle_jlbh(rows: Any) -> dict[str, Any]:
    """The row (`native_compare.Rows` hands itself over): one queue root, JLBH then sixnines, `rows.trials` times."""
    from bench import native_compare as nc  # here, not at the top: native_compare imports this module

    cell = chronicle_cell(rows.measure_s)
    with nc.fresh_brokers(cell, rows.workdir) as brokers:
        runs = iter(range(rows.trials))
        trials = rows._alternate(
            lambda: jlbh(Path(brokers.address) / f"jlbh-{next(runs)}", cell.spec.version, rows.measure_s),
            lambda: nc.figures(nc.sixnines(cell, brokers, rows.lake, rows.console), "e2e"),
            "e2e",
        )
    for trial in trials:
        trial["ratio_from_intended"] = intended_ratios(trial)
        if trial["sixnines"].get("status") != "ok":  # a cell the harness failed measured the harness: no ratio
            trial["ratio_ungated"] = trial["ratio"]  # kept beside, for what the host did to both sides
            trial["ratio"] = dict.fromkeys(trial["ratio"])
            trial["ratio_from_intended"] = dict.fromkeys(trial["ratio_from_intended"])
    summary = summarize_trials(trials, ("50", "99"), TARGET)
    from_intended = summarize_trials([{"ratio": t["ratio_from_intended"]} for t in trials], ("50", "99"), TARGET)
    return {
        "shape": f"Chronicle Queue {cell.spec.version}, one hop, {SIZE} B @ {RATE}/s, tmpfs, {ROLL_CYCLE}, {WAIT}",
        "trials": trials,
        "ratio": {p: s["median"] for p, s in summary.items()},
        "ratio_summary": summary,
        "ratio_from_intended": {p: s["median"] for p, s in from_intended.items()},
        "ratio_from_intended_summary": from_intended,
        "ratio_means": nc.RATIO_MEANS,
        "target": f"ratio <= {TARGET} at p50 and p99",
        "notes": NOTES,
    }
