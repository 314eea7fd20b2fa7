"""The command line every job shares: `--lake DIR --run-id R [--run-id R2 …] [--master URL]`."""

from __future__ import annotations

import argparse
from collections.abc import Sequence


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    # A string: `s3://bucket/prefix` would lose a slash as a Path (bench_tasks.lake.storage.lake_path reads both).
    p.add_argument("--lake", required=True, help="lake root: a folder, or s3://bucket/prefix")
    p.add_argument("--run-id", action="append", required=True, dest="run_ids", help="run id (repeatable)")
    p.add_argument("--master", default=None, help="Spark master (default: spark-submit's, else local[*])")
    return p


def parse(description: str, argv: Sequence[str] | None = None) -> argparse.Namespace:
    return parser(description).parse_args(argv)
