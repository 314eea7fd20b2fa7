"""How long does `make bench`'s `analysis` task take? (issue 15: target ≤ 30 s)

Lands a run shaped like the default quick sweep (matrices/quick.yaml: NATS core e2e three times, core rtt,
JetStream e2e and publish, Kafka e2e; 1000 msg/s, 3 s warmup (Kafka 10 s), 10 s measure, 2 s cooldown: 70,000
measure-phase messages) with the harness's schemas and writers (tests/spark/synth.py), then starts the task's
own command, `spark-submit spark_jobs/pipeline.py --lake L --run-id R` with the task's `--conf`s on
`local[*]` (tools/airflow's spark_default), and reports its wall time (JVM start-up included), the step
seconds the pipeline prints and the load average before and after, to bench/results/analysis_task.json.

    .venv/bin/python bench/analysis_task.py --workdir DIR [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from rich.console import Console

# The synthetic-data builders live in tests/ (not installed): import them from this checkout.
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from spark_jobs.launch import submit_conf  # noqa: E402
from tests.spark.synth import SynthCell, write_run  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "analysis_task.json"
RUN_ID = "sixnines_quick__bench"
QUICK = {"rate_per_s": 1000.0, "warmup_s": 3.0, "measure_s": 10.0, "cooldown_s": 2.0}


def quick_cells() -> list[SynthCell]:
    """The quick sweep's cells, the repeated one once per repeat (each with its own seed)."""
    core = [
        SynthCell("nats-core-e2e", repeat=r, repeats=3, seed=10 + r, lost=[5, 500], allowed_loss_ratio=0.001, **QUICK)
        for r in (1, 2, 3)
    ]
    return [
        *core,
        SynthCell("nats-core-rtt", measurement="rtt", seed=20, **QUICK),
        SynthCell("nats-js-e2e", mode="jetstream", seed=30, **QUICK),
        SynthCell("nats-js-publish", mode="jetstream", measurement="publish", seed=40, **QUICK),
        SynthCell("kafka-e2e", system="kafka", version="4.1.0", acks="1", seed=50, **{**QUICK, "warmup_s": 10.0}),
    ]


def messages(lake: Path) -> int:
    """The run's measure-phase sends, as the sweep's `tables` task counts them for the analysis' launch."""
    (cells,) = lake.rglob("cells.parquet")
    return sum(pq.read_table(cells, columns=["sent"])["sent"].to_pylist())


def submit(lake: Path) -> tuple[float, str]:
    """The analysis task's command line; its wall seconds and output."""
    spark_submit = Path(sys.executable).parent / "spark-submit"
    conf = [arg for key, value in submit_conf(messages(lake)).items() for arg in ("--conf", f"{key}={value}")]
    command = [str(spark_submit), "--master", "local[*]", "--name", "sixnines-analysis", *conf]
    command += [str(REPO / "spark_jobs" / "pipeline.py"), "--lake", str(lake), "--run-id", RUN_ID]
    # spark-submit finds its Spark home with the first `python3` on PATH: the venv's, as the task's own PATH has it
    path = os.pathsep.join([str(spark_submit.parent), os.environ.get("PATH", "")])
    env = {**os.environ, "PYTHONPATH": str(REPO), "PATH": path}
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"spark-submit exited {done.returncode}:\n{done.stdout}\n{done.stderr[-4000:]}")
    return seconds, done.stdout


def step_seconds(output: str) -> dict[str, float]:
    """The pipeline's own `seconds per step:` line."""
    line = next(x for x in output.splitlines() if "seconds per step:" in x)
    return {k: float(v) for k, v in re.findall(r"\s*([\w .]+?) ([\d.]+)(?:,|$)", line.split("seconds per step:")[1])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=3, help="how many times to run the task on the same lake")
    args = parser.parse_args()
    console = Console()
    lake = args.workdir / "lake-quick"
    shutil.rmtree(lake, ignore_errors=True)
    write_run(lake, quick_cells(), RUN_ID)
    measured: list[dict[str, Any]] = []
    for index in range(args.runs):
        load_before = [round(x, 2) for x in os.getloadavg()]
        seconds, output = submit(lake)
        steps = step_seconds(output)
        measured.append(
            {
                "wall_seconds": round(seconds, 2),
                "steps": steps,
                "load_before": load_before,
                "load_after": [round(x, 2) for x in os.getloadavg()],
            }
        )
        console.print(f"run {index + 1}: {seconds:.1f} s (load {load_before[0]:.2f}); steps {steps}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"benchmark": "analysis_task", "runs": measured}, indent=2) + "\n")
    console.print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
