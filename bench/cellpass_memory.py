"""How much memory does a cell task of the cell pass (spark_jobs.cellpass) hold, against its cell's raw Parquet?
(issue 45: at most 10× the raw files, and a 50 M-message cell under 2 GiB)

For each `--messages N` this lands one JetStream-shaped cell (acknowledged sends, e2e receipts: the lag, publish
and e2e series; a few messages lost and a few received twice, 1 ms later) as the harness lands it: a producer's
sent file and a consumer's received file written part by part with the real schemas and writer
(`write_parquet_parts`), intended times at a uniform rate, lognormal latencies with a Pareto tail (as
tests/spark/synth.py draws them). Then it runs the cell's task (`spark_jobs.cellpass.task.run_cell`, what a Spark
Python worker runs) in a fresh process and records that process's peak RSS (VmHWM), its RSS once the
libraries are imported (the floor any worker has), the raw bytes, peak / raw and the task's wall and CPU
seconds.

`--before DIR` (a checkout of another tree, e.g. `git worktree add --detach /tmp/cellpass-before main`) runs the same
task from that tree too, for the sizes up to `--before-max`, alternated with this tree's, and checks that both
give the same summary rows (every percentile, count, min and max equal). Results, with the load average before
and after each task, go to bench/results/cellpass_memory.json.

    .venv/bin/python bench/cellpass_memory.py --messages 1000000 --messages 10000000 --messages 50000000 \\
        --workdir /tmp/cellpass-memory [--before /tmp/cellpass-before --before-max 10000000] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results" / "cellpass_memory.json"
T0 = 1_000_000_000_000
NS = 1_000_000_000
RATE_PER_S = 50_000.0
PHASES = (0.05, 0.9, 0.05)  # warmup, measure, cooldown shares of the messages
PART = 1_000_000  # messages generated and written at a time
LOST = 20
DUPLICATES = 20
LAG_NS = 50_000


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _intended(start: int, stop: int) -> np.ndarray:
    return T0 + np.round(np.arange(start, stop) * (NS / RATE_PER_S)).astype(np.int64)


def _latency(start: int, stop: int, seed: int) -> np.ndarray:
    """Lognormal around 300 µs with a heavy tail (synth.latencies' law), drawn per part."""
    rng = np.random.default_rng([seed, start])
    n = stop - start
    return (rng.lognormal(np.log(300_000), 0.6, n) + rng.pareto(2.5, n) * 50_000).astype(np.int64)


class Cell:
    """One synthetic cell of `messages` messages: its phase bounds, its lost and twice-received seqs."""

    def __init__(self, messages: int, seed: int):
        self.messages, self.seed = messages, seed
        self.measure_start = T0 + int(messages * PHASES[0] / RATE_PER_S * NS)
        self.measure_end = self.measure_start + int(messages * PHASES[1] / RATE_PER_S * NS)
        rng = np.random.default_rng([seed, 0])
        chosen = np.sort(rng.choice(messages, LOST + DUPLICATES, replace=False))
        self.lost, self.twice = chosen[:LOST], chosen[LOST:]

    def phase(self, intended: np.ndarray) -> Any:
        import pyarrow as pa

        edges = np.array([self.measure_start, self.measure_end])
        names = pa.array(["warmup", "measure", "cooldown"])
        return names.take(pa.array(np.searchsorted(edges, intended, side="right")))

    def sent_parts(self) -> Iterator[Any]:
        import pyarrow as pa

        from bench_tasks import SENT_SCHEMA

        for start in range(0, self.messages, PART):
            stop = min(start + PART, self.messages)
            intended = _intended(start, stop)
            n = stop - start
            columns = {
                "producer_id": pa.array(np.zeros(n, np.int32)),
                "seq": pa.array(np.arange(start, stop, dtype=np.int64)),
                "intended_ns": pa.array(intended),
                "sent_ns": pa.array(intended + LAG_NS),
                "acked_ns": pa.array(intended + LAG_NS + _latency(start, stop, self.seed) // 2),
                "partition": pa.nulls(n, pa.int32()),
                "offset": pa.nulls(n, pa.int64()),
                "phase": self.phase(intended),
                "error": pa.nulls(n, pa.string()),
            }
            yield pa.table(columns, schema=SENT_SCHEMA)

    def _receipts(self, seq: np.ndarray, later_ns: int) -> Any:
        import pyarrow as pa

        from bench_tasks import RECEIVED_SCHEMA

        n = len(seq)
        intended = T0 + np.round(seq * (NS / RATE_PER_S)).astype(np.int64)
        columns = {
            "consumer_id": pa.array(np.zeros(n, np.int32)),
            "producer_id": pa.array(np.zeros(n, np.int32)),
            "seq": pa.array(seq),
            "intended_ns": pa.array(intended),
            "sent_ns": pa.array(intended + LAG_NS),
            "received_ns": pa.array(intended + LAG_NS + self._latency_of(seq) + later_ns),
            "partition": pa.nulls(n, pa.int32()),
            "offset": pa.nulls(n, pa.int64()),
            "leader": pa.nulls(n, pa.int32()),
            "hop": pa.array(np.zeros(n, np.int8)),
            "relay_received_ns": pa.nulls(n, pa.int64()),
            "relay_sent_ns": pa.nulls(n, pa.int64()),
            "phase": self.phase(intended),
        }
        return pa.table(columns, schema=RECEIVED_SCHEMA)

    def _latency_of(self, seq: np.ndarray) -> np.ndarray:
        """Each seq's latency: its part's draw (seqs of one part only, or a few anywhere)."""
        out = np.empty(len(seq), np.int64)
        for start in np.unique(seq // PART * PART).tolist():
            mine = (seq >= start) & (seq < start + PART)
            out[mine] = _latency(start, min(start + PART, self.messages), self.seed)[seq[mine] - start]
        return out

    def received_parts(self) -> Iterator[Any]:
        for start in range(0, self.messages, PART):
            seq = np.arange(start, min(start + PART, self.messages), dtype=np.int64)
            yield self._receipts(seq[~np.isin(seq, self.lost)], 0)
        yield self._receipts(self.twice, 1_000_000)  # received again 1 ms later


def land(folder: Path, messages: int, seed: int) -> dict[str, Any]:
    """The cell's two raw files in `folder` and the task's facts (a UnitWork's fields)."""
    from bench_tasks import RECEIVED_SCHEMA, SENT_SCHEMA, write_parquet_parts

    cell = Cell(messages, seed)
    folder.mkdir(parents=True, exist_ok=True)
    sent, received = folder / "sent-p0.parquet", folder / "received-c0.parquet"
    if not (sent.exists() and received.exists()):
        write_parquet_parts(SENT_SCHEMA, cell.sent_parts(), sent)
        write_parquet_parts(RECEIVED_SCHEMA, cell.received_parts(), received)
    return {
        "unit": 0,
        "cell_ix": 0,
        "t0_ns": T0,
        "measure_start_ns": cell.measure_start,
        "measure_end_ns": cell.measure_end,
        "acked_code": 1,  # spark_jobs.metrics.PUBLISH
        "received_measured": True,
        "sent_files": [str(sent)],
        "received_files": [str(received)],
    }


def _high_water_kib() -> int:
    """This process's peak RSS (VmHWM). Not ru_maxrss: Linux carries a parent's peak into a child's across fork
    and exec, so a task started by this (larger) process would report this process's peak as its own."""
    status = Path("/proc/self/status").read_text().splitlines()
    return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))


def task(facts_file: Path, out: Path) -> None:
    """In a fresh process: the cell's task from the checkout first on sys.path; its peak RSS and seconds."""
    from spark_jobs.cellpass.facts import UnitWork
    from spark_jobs.cellpass.task import run_cell

    facts = json.loads(facts_file.read_text())
    work = UnitWork(
        **{**facts, "sent_files": tuple(facts["sent_files"]), "received_files": tuple(facts["received_files"])}
    )
    floor_kib = _high_water_kib()
    began, cpu = time.monotonic(), time.process_time()
    result = run_cell([work])
    seconds, cpu = time.monotonic() - began, time.process_time() - cpu
    peak_kib = _high_water_kib()
    summary = result.summary.drop(columns=["mean_ns", "stddev_ns"]).astype(str)
    keys = ["level", "g", "metric", "basis", "leader", "sec"]
    summary = summary.sort_values(keys).reset_index(drop=True)
    summary.to_parquet(out.with_suffix(".parquet"))
    report = {"peak_kib": peak_kib, "floor_kib": floor_kib, "seconds": round(seconds, 2), "cpu_seconds": round(cpu, 2)}
    report["summary_rows"] = len(summary)
    out.write_text(json.dumps(report))


def run_task(repo: Path, facts: Path, out: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(repo), str(repo / "plugins")])}
    load_before = _load()
    subprocess.run([sys.executable, __file__, "--task", str(facts), str(out)], env=env, check=True, cwd=repo)
    tree = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=repo, capture_output=True, text=True).stdout
    return {"tree": tree.strip(), **json.loads(out.read_text()), "load_before": load_before, "load_after": _load()}


def measure(args: argparse.Namespace) -> dict[str, Any]:
    import pandas as pd

    entries = []
    for messages in args.messages:
        folder = args.workdir / f"cell-{messages}"
        facts = land(folder, messages, args.seed)
        (folder / "facts.json").write_text(json.dumps(facts))
        raw = sum(Path(f).stat().st_size for f in (*facts["sent_files"], *facts["received_files"]))
        trees = {"after": REPO}
        if args.before and messages <= args.before_max:
            trees = {"before": args.before, "after": REPO}
        entry: dict[str, Any] = {"messages": messages, "raw_bytes": raw, "bytes_per_message": round(raw / messages, 2)}
        for name, repo in trees.items():
            got = run_task(repo, folder / "facts.json", folder / f"{name}.json")
            got["peak_mib"] = round(got.pop("peak_kib") / 1024, 1)
            got["floor_mib"] = round(got.pop("floor_kib") / 1024, 1)
            got["peak_over_raw"] = round(got["peak_mib"] * 2**20 / raw, 1)
            got["above_floor_over_raw"] = round((got["peak_mib"] - got["floor_mib"]) * 2**20 / raw, 1)
            entry[name] = got
            print(f"{messages:,} messages, {raw:,} raw bytes, {name}: {got}", flush=True)
        if "before" in entry:
            same = pd.read_parquet(folder / "before.parquet").equals(pd.read_parquet(folder / "after.parquet"))
            entry["same_summary"] = bool(same)
            if not same:
                raise SystemExit(f"{messages:,} messages: the two trees' summary rows differ")
        if not args.keep:
            shutil.rmtree(folder)
        entries.append(entry)
    return {
        "command": " ".join(sys.argv),
        "host": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version()},
        "sizes": entries,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, action="append", help="a cell's messages (repeatable)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/cellpass-memory"))
    parser.add_argument("--before", type=Path, help="another checkout whose cell task runs beside this tree's")
    parser.add_argument("--before-max", type=int, default=10_000_000, help="largest cell to run --before on")
    parser.add_argument("--seed", type=int, default=45)
    parser.add_argument("--keep", action="store_true", help="keep the landed cells")
    parser.add_argument("--task", nargs=2, type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.task:
        task(*args.task)
        return
    args.messages = args.messages or [1_000_000, 10_000_000, 50_000_000]
    result = measure(args)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
