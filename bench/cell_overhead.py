"""How much wall time does a cell spend beyond its phases, and how long does `make bench`'s DAG run take?

Runs the default quick sweep (matrices/quick.yaml: 7 cell runs of NATS core and JetStream and one Kafka broker)
through `airflow dags test` as `make bench` does, once per checkout given, alternating checkouts when `--runs` asks
for more than one, so two versions of the harness are compared on the same host in one run. For each DAG run it
reports the wall time, each cell's `result.json` overhead in run order, and per system their medians:
`before_t0_s` (brokers and workers up), `after_end_s` (drain, stop, the gap between tasks) and, where recorded,
`workers_ready_s`. The load average before and after each run stands beside it. Writes bench/results/cell_overhead.json.

Targets: a worker ready within 1 s of being asked for, a cell's overhead at most 1.5 s, the DAG run at most 150 s.

    .venv/bin/python bench/cell_overhead.py [--repo OTHER_CHECKOUT] [--repo .] [--runs 2]

A checkout needs its `.venv` (a link to this one's will do) and an Airflow home (`make airflow-init`, or this
script migrates one on first use).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results" / "cell_overhead.json"
DAG = "sixnines_quick"
TARGETS = {"workers_ready_s": 1.0, "overhead_s": 1.5, "dag_s": 150.0}
POOL = ("sixnines_bench", "1", "one benchmark at a time on this host")


def airflow(repo: Path, *args: str, env: dict[str, str], timeout: float = 1800) -> subprocess.CompletedProcess:
    """The checkout's own Airflow CLI (tools/airflow: its dags, plugins and Airflow home), its code first."""
    return subprocess.run(  # in the checkout: `python -m` children put their working folder first on the path
        [str(repo / "tools" / "airflow"), *args], env=env, capture_output=True, text=True, timeout=timeout, cwd=repo
    )


def checkout_env(repo: Path, lake: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "SIXNINES"))}
    code = f"{repo}:{repo / 'plugins'}"  # its own code first, not what the venv installed editable
    return {**env, "PYTHONPATH": code, "SIXNINES_LAKE": str(lake), "SIXNINES_CACHE": str(HERE / ".cache")}


def ensure_airflow_home(repo: Path, env: dict[str, str]) -> None:
    if not (repo / ".airflow" / "airflow.db").exists():
        airflow(repo, "db", "migrate", env=env).check_returncode()
        airflow(repo, "pools", "set", *POOL, env=env).check_returncode()


def one_run(repo: Path, workdir: Path, label: str) -> dict[str, Any]:
    """One DAG run of the quick sweep from `repo`: its wall time, its cells' overheads, the load beside them."""
    lake = workdir / f"lake-{label}-{time.monotonic_ns()}"
    env = checkout_env(repo, lake)
    ensure_airflow_home(repo, env)
    load_before = os.getloadavg()
    started = time.monotonic()
    done = airflow(repo, "dags", "test", DAG, env=env)
    seconds = time.monotonic() - started
    cells = [json.loads(p.read_text()) for p in (lake / "raw").rglob("result.json")]  # repeats included
    return {
        "checkout": label,
        "exit_code": done.returncode,
        "dag_s": round(seconds, 1),
        "cells": len(cells),
        "failed": [f"{c['label']}: {c.get('reason')}" for c in cells if c["status"] != "ok"],
        "output_tail": (done.stdout + done.stderr)[-2000:] if done.returncode else "",
        "by_system": by_system(cells),
        "by_cell": by_cell(cells),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
    }


def by_system(cells: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per system, the median of each overhead part over its cells (parts a checkout does not record are left
    out), and the worst cell's total."""
    out: dict[str, dict[str, float]] = {}
    for system in sorted({c["spec"]["system"] for c in cells}):
        parts = [c["overhead"] for c in cells if c["spec"]["system"] == system and c.get("overhead")]
        if not parts:  # no cell of it got as far as its schedule
            continue
        keys = sorted({k for p in parts for k in p})
        out[system] = {f"median_{k}": round(statistics.median(p[k] for p in parts if k in p), 3) for k in keys}
        out[system]["max_total_s"] = round(max(p["total_s"] for p in parts), 3)
    return out


def by_cell(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each cell's overhead in the order the cells ran (t0 on CLOCK_MONOTONIC, one clock for the whole DAG run):
    which cell is the worst of its system, and whether it was the first (a fresh broker, no standby to claim)."""
    ran = sorted((c for c in cells if c.get("overhead") and c.get("phases")), key=lambda c: c["phases"]["t0_ns"])
    return [{"label": c["label"], "repeat": c.get("repeat"), **c["overhead"]} for c in ran]


def verdict(run: dict[str, Any]) -> dict[str, bool]:
    """Whether the run met each target (a part it does not record cannot meet its target)."""
    systems = run["by_system"].values()
    return {
        "workers_ready_s": all(s.get("median_workers_ready_s", 99) <= TARGETS["workers_ready_s"] for s in systems),
        "overhead_s": all(s["median_total_s"] <= TARGETS["overhead_s"] for s in systems),
        "dag_s": run["dag_s"] <= TARGETS["dag_s"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", action="append", type=Path, help="a checkout to run (repeatable; default: this)")
    parser.add_argument("--runs", type=int, default=1, help="DAG runs per checkout, alternated")
    args = parser.parse_args()
    repos = [r.resolve() for r in (args.repo or [HERE])]
    runs = []
    with tempfile.TemporaryDirectory(prefix="cell-overhead-") as workdir:
        for trial in range(args.runs):
            for repo in repos:
                run = one_run(repo, Path(workdir), repo.name)
                run.update(trial=trial, targets_met=verdict(run))
                print(json.dumps(run), flush=True)
                runs.append(run)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"targets": TARGETS, "dag": DAG, "runs": runs}, indent=1))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
