"""How long does a run on an S3 lake take to analyse by the cell pass, and by the Spark SQL passes?

Lands bench/analysis_task.py's quick-sweep-shaped run (70,000 measure-phase messages in eight units) on a
bucket of a moto server on loopback, then analyses it by one route per fresh process (tests/s3/routes_job.py:
the JVM started with the s3a jars, the analysis alone timed, JVM start-up excluded), the two routes alternated,
and prints each route's seconds and the load average before and after.

    .venv/bin/python bench/s3_routes.py --workdir DIR [--runs 2]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import boto3

# The synthetic-data builders and the moto server live in tests/ (not installed): import them from this checkout.
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench.analysis_task import RUN_ID, quick_cells  # noqa: E402
from bench_tasks import RunInfo, S3Path, S3Settings  # noqa: E402
from tests.s3.conftest import moto_server, upload_run  # noqa: E402
from tests.spark.synth import write_run  # noqa: E402

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench-secret", "AWS_DEFAULT_REGION": "us-east-1"}


def route_seconds(lake: S3Path, endpoint: str, work: Path, route: str) -> float:
    """One fresh process analysing the run by `route` (routes_job's own timing of the analysis)."""
    out, events = work / f"out-{route}", work / f"events-{route}"
    for folder in (out, events):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
    env = {**os.environ, **CREDENTIALS, "AWS_ENDPOINT_URL": endpoint, "PYTHONPATH": f"{REPO}:{REPO / 'plugins'}"}
    command = [sys.executable, "-m", "tests.s3.routes_job", str(lake), RUN_ID, str(out), str(events)]
    done = subprocess.run([*command, "--routes", route], env=env, cwd=REPO, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{route}: exit {done.returncode}\n{(done.stdout + done.stderr)[-3000:]}")
    (seconds,) = re.findall(rf"^seconds: {route} ([\d.]+)$", done.stdout, re.M)
    return float(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=2, help="how many times to time each route")
    args = parser.parse_args()
    work = args.workdir / "s3-routes"
    shutil.rmtree(work, ignore_errors=True)
    run = write_run(work / "local", quick_cells(), RUN_ID)
    with moto_server() as endpoint:
        bucket = f"bench-{uuid.uuid4().hex[:8]}"
        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", **_boto(CREDENTIALS))
        client.create_bucket(Bucket=bucket)
        settings = S3Settings("bench", "bench-secret", None, endpoint, "us-east-1")
        lake = S3Path(f"{bucket}/lake", settings)
        (work / "staging").mkdir()
        upload_run(work / "local", lake, RunInfo(run.run_id, run.run_date), work / "staging")
        print(f"load before: {os.getloadavg()[0]:.2f}")
        for _ in range(args.runs):
            for route in ("cells", "sql"):
                print(f"{route}: {route_seconds(lake, endpoint, work, route):.2f} s", flush=True)
        print(f"load after: {os.getloadavg()[0]:.2f}")


def _boto(env: dict[str, str]) -> dict[str, str]:
    return {"aws_access_key_id": env["AWS_ACCESS_KEY_ID"], "aws_secret_access_key": env["AWS_SECRET_ACCESS_KEY"]}


if __name__ == "__main__":
    main()
