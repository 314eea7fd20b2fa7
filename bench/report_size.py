"""How big is a run's HTML report, and where do its bytes go? (issue 21's benchmark: the default sweep's report
must be ≤ 1 MB; it was 3.2 MB when the pipeline tables were dumped inline and the charts written as matplotlib
left them.)

Builds the report of a run that is already in the lake (by default the newest; run the default sweep first:
`make bench`, or `sixnines run matrices/quick.yaml` then `sixnines analyze RUN_ID`), measures the file, each
section, the embedded scatter images, and the build time, and writes bench/results/report_size.json with the
host's load beside the figures.

    .venv/bin/python bench/report_size.py [RUN_ID] [--lake lake] [--limit-bytes 1000000]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import re
import sys
import time
from pathlib import Path

from bench_tasks import build_run_report, latest_run_id

RESULTS = Path(__file__).parent / "results" / "report_size.json"
SECTION = re.compile(r'<section id="([^"]+)">')
IMAGE = re.compile(r'xlink:href="data:image/png;base64,([^"]+)"')


def sections(html: str) -> dict[str, int]:
    """Bytes per top-level section (cells grouped as `cells`)."""
    marks = [(m.start(), m.group(1)) for m in SECTION.finditer(html)] + [(len(html), "")]
    out: dict[str, int] = {"head": marks[0][0] if marks else len(html)}
    for (start, name), (end, _) in itertools.pairwise(marks):
        key = "cells" if name.startswith("cell-") else name
        out[key] = out.get(key, 0) + end - start
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_id", nargs="?")
    parser.add_argument("--lake", default=os.environ.get("SIXNINES_LAKE", "lake"))
    parser.add_argument("--limit-bytes", type=int, default=1_000_000)
    args = parser.parse_args()
    run_id = args.run_id or latest_run_id(args.lake)
    started = time.perf_counter()
    path = build_run_report(args.lake, run_id)
    seconds = time.perf_counter() - started
    html = path.read_text()
    size = len(html.encode())
    result = {
        "run_id": run_id,
        "report": str(path),
        "bytes": size,
        "limit_bytes": args.limit_bytes,
        "within_limit": size <= args.limit_bytes,
        "sections_bytes": sections(html),
        "images": len(IMAGE.findall(html)),
        "image_bytes": sum(len(m) for m in IMAGE.findall(html)),
        "charts": html.count("<svg"),
        "build_seconds": round(seconds, 2),
        "host": {"cpus": os.cpu_count(), "load_avg": os.getloadavg(), "python": platform.python_version()},
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0 if result["within_limit"] else 1


if __name__ == "__main__":
    sys.exit(main())
