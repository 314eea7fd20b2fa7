"""How much memory does a receiver need per million messages it holds? (issue 22, row 9)

A consumer keeps every receipt of the cell until it writes its Parquet file at the end, so its memory grows
with the messages it receives; a 6 M-message cell once cost ≈2 GB per consumer. This feeds one receiver's
log (`ReceivedLog`, the object the generator's consumer process fills) with real sixnines payloads, handed
over the way a driver hands them (one message per hand-over as core NATS does, or batches as librdkafka
does), in a fresh process per figure, and reads that process's memory from /proc:

- `holding`: resident memory once all messages are held, over what the process used before the log existed;
- `peak`: the highest resident memory up to and including writing the consumer's Parquet file (the
  consumer's last act), over the same baseline.

Each figure is per million messages. `--before REV…` measures the receivers of older commits the same way
(each tree from `git archive`, run with this venv), so they stand side by side in one run. Writes
bench/results/receiver_memory.json with the host's load beside every figure.

    .venv/bin/python bench/receiver_memory.py [--messages 1000000 5000000] [--size 256] [--handover 1]
        [--before c90e77d main]
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
import platform
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results" / "receiver_memory.json"
MB = 1 << 20


def status_kib(field: str) -> int:
    """A field of /proc/self/status in KiB (VmRSS: resident now; VmHWM: the resident peak so far)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


# -- the child: one receiver, one figure ---------------------------------------------------------------------
def child(tree: str, messages: int, size: int, handover: int, out: str) -> dict[str, Any]:
    sys.path.insert(0, tree)
    import numpy as np  # noqa: F401  imported before the baseline, as in a worker

    parts = ("ReceivedLog", "PayloadFactory", "PhasePlan", "write_parquet")
    log_class, PayloadFactory, PhasePlan, write_parquet = (_tree_name(name) for name in parts)
    factory = PayloadFactory(size)
    base_kib = status_kib("VmRSS")
    log = _new_log(log_class, messages)
    feed = _feeder(log, handover)
    began = time.perf_counter()
    t0 = 1_000_000_000
    for seq in range(messages):
        intended = t0 + seq * 10_000  # 100,000 msg/s
        feed(factory.make(seq % 4, seq, intended, intended + 5_000))
    if hasattr(log, "flush"):
        log.flush()
    fed_s = time.perf_counter() - began
    holding_kib = status_kib("VmRSS")
    plan = PhasePlan(t0, messages * 10_000 // 10, messages * 10_000 * 8 // 10, messages * 10_000 // 10)
    began = time.perf_counter()
    if hasattr(log, "write"):  # the consumer's own way to its file, whichever commit this is
        log.write(0, plan, Path(out))
    else:
        write_parquet(log.table(0, plan), Path(out))
    written_s = time.perf_counter() - began
    held = log.count if isinstance(log.count, int) else log.count()
    assert held == messages, (held, messages)
    return {
        "messages": messages,
        "holding_bytes_per_message": round((holding_kib - base_kib) * 1024 / messages, 1),
        "peak_bytes_per_message": round((status_kib("VmHWM") - base_kib) * 1024 / messages, 1),
        "holding_mb_per_million": round((holding_kib - base_kib) / 1024 / (messages / 1e6), 1),
        "peak_mb_per_million": round((status_kib("VmHWM") - base_kib) / 1024 / (messages / 1e6), 1),
        "peak_mb": round((status_kib("VmHWM") - base_kib) / 1024, 1),
        "feed_s": round(fed_s, 2),
        "write_s": round(written_s, 2),
        "parquet_mb": round(Path(out).stat().st_size / MB, 1),
    }


# Where commits from before the receiver's parts were public names of `bench_tasks` kept them, tried in order:
# `load.receivedlog`, the generator module before it was split, the flat package before issue 16. These are
# addresses in other commits' trees, frozen in their history. This checkout's receiver is reached through its
# public API (`_tree_name`), which follows a module that moves.
OLDER_HOMES: dict[str, tuple[tuple[str, str], ...]] = {
    "ReceivedLog": (
        ("bench_tasks.load.receivedlog", "ReceivedLog"),
        ("bench_tasks.load.generator", "_ReceivedLog"),
        ("bench_tasks.generator", "_ReceivedLog"),
    ),
    "PayloadFactory": (("bench_tasks.load.payload", "PayloadFactory"), ("bench_tasks.payload", "PayloadFactory")),
    "PhasePlan": (("bench_tasks.core.schedule", "PhasePlan"),),
    "write_parquet": (("bench_tasks.lake.records", "write_parquet"),),
}


def _tree_name(name: str) -> Any:
    """`name` of the tree on sys.path: a public name of its `bench_tasks`, else where an older commit kept it."""
    import bench_tasks

    if hasattr(bench_tasks, name):
        return getattr(bench_tasks, name)
    for module, attribute in OLDER_HOMES[name]:
        try:
            return getattr(importlib.import_module(module), attribute)
        except (ImportError, AttributeError):
            continue
    raise ImportError(f"no {name} in {Path(bench_tasks.__file__).parent}, publicly or in {OLDER_HOMES[name]}")


def _new_log(log_class: Any, messages: int) -> Any:
    """A receiver's log as that commit's consumer makes it: preallocated for its schedule where it can be."""
    takes = inspect.signature(log_class).parameters
    options = {"expected": messages, "clock": time.monotonic_ns}
    return log_class(**{k: v for k, v in options.items() if k in takes})


class _Handed:
    """One hand-over, as a driver gives it (core NATS: one message; librdkafka: a batch)."""

    __slots__ = ("_payloads",)

    def __init__(self, payloads: list[bytes]):
        self._payloads = payloads

    def payloads(self) -> list[bytes]:
        return self._payloads

    def partitions(self) -> None:
        return None

    def offsets(self) -> None:
        return None


def _feeder(log: Any, handover: int):
    if not hasattr(log, "on_messages"):  # before issue 14: one call per message
        return lambda data: log.on_message(data, None, None)
    if handover == 1:
        return lambda data: log.on_messages(_Handed([data]))
    pending: list[bytes] = []

    def feed(data: bytes) -> None:
        pending.append(data)
        if len(pending) == handover:
            log.on_messages(_Handed(pending[:]))
            pending.clear()

    return feed


# -- the parent: one child per figure, the results side by side -----------------------------------------------
def tree_of(rev: str, into: Path) -> Path:
    """The bench_tasks of commit `rev`, from `git archive`, for a child to import."""
    archive = into / f"{rev}.tar"
    with archive.open("wb") as f:
        subprocess.run(["git", "-C", str(REPO), "archive", rev, "bench_tasks"], check=True, stdout=f)
    root = into / rev
    root.mkdir()
    with tarfile.open(archive) as tar:
        tar.extractall(root, filter="data")
    return root


def measure(tree: Path, messages: int, size: int, handover: int, scratch: Path) -> dict[str, Any]:
    out = scratch / f"received-{messages}.parquet"
    command = [sys.executable, __file__, "--child", str(tree), str(messages), str(size), str(handover), str(out)]
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=scratch)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    out.unlink(missing_ok=True)
    return {**json.loads(done.stdout.splitlines()[-1]), "load_average": list(os.getloadavg())}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        tree, messages, size, handover, out = sys.argv[2:7]
        print(json.dumps(child(tree, int(messages), int(size), int(handover), out)))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, nargs="+", default=[1_000_000, 5_000_000])
    parser.add_argument("--size", type=int, default=256, help="message size in bytes")
    parser.add_argument("--handover", type=int, default=1, help="messages per hand-over (core NATS: 1)")
    parser.add_argument("--before", nargs="*", default=[], help="also measure the receivers of these commits")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    results: dict[str, Any] = {
        "benchmark": "receiver_memory",
        "host": {"machine": platform.machine(), "cores": os.cpu_count(), "python": platform.python_version()},
        "size_bytes": args.size,
        "handover": args.handover,
        "uptime_before": list(os.getloadavg()),
        "receivers": {},
    }
    with tempfile.TemporaryDirectory(prefix="receiver-memory-") as scratch:
        trees = {rev: tree_of(rev, Path(scratch)) for rev in args.before}
        trees["this checkout"] = REPO
        for name, tree in trees.items():
            for messages in args.messages:
                figure = measure(tree, messages, args.size, args.handover, Path(scratch))
                results["receivers"].setdefault(name, []).append(figure)
                print(
                    f"{name:>24}: {messages:>9,} messages  holding {figure['holding_mb_per_million']:7.1f} MB/M  "
                    f"peak {figure['peak_mb_per_million']:7.1f} MB/M  (peak {figure['peak_mb']:,.0f} MB; "
                    f"load {figure['load_average'][0]:.2f})",
                    flush=True,
                )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
