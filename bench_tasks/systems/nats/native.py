"""The official NATS CLI beside sixnines (`bench/native_compare.py`): built from the Go module proxy at a pinned
version (`go install github.com/nats-io/natscli/nats@…`) into the cache, and its output read.

What its commands measure, so a comparison says what it compares:
- `nats bench pub` publishes as fast as it can (closed loop, no schedule): its rate is a ceiling, not a
  latency-bearing load; `nats bench sub` counts what arrives in another process.
- `nats latency` paces itself by sleeping (adjusting the sleep to hit the rate) and measures one way from the
  actual send, wall clock, publisher and subscriber in one Go process, stamping in nats.go's callback (after
  the client parsed the message); `--histogram F` writes every latency to `F.raw` (ms, one per line).
- `nats bench service request` times each request from its send to its reply, one at a time, against
  `nats bench service serve`.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ...errors import NativeToolError
from ...paths import cache_dir

NATSCLI_MODULE = "github.com/nats-io/natscli/nats"
NATSCLI_VERSION = "v0.5.1"  # the release the comparison was written against; bump here, nowhere else
_GO_BUILD_TIMEOUT_S = 1800


def natscli(version: str = NATSCLI_VERSION) -> Path:
    """The `nats` binary of `version`, built once with `go install` into `<cache>/natscli/<version>/`."""
    home = cache_dir() / "natscli" / version
    binary = home / "nats"
    if binary.exists():
        return binary
    go = shutil.which("go")
    if go is None:
        raise NativeToolError(f"the Go toolchain (`go`) is needed to build {NATSCLI_MODULE}@{version}")
    home.mkdir(parents=True, exist_ok=True)
    build = home / ".build"
    build.mkdir(exist_ok=True)
    env = {**os.environ, "GOBIN": str(build), "CGO_ENABLED": "0"}
    cmd = [go, "install", f"{NATSCLI_MODULE}@{version}"]
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=_GO_BUILD_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise NativeToolError(f"go install {NATSCLI_MODULE}@{version} took over {_GO_BUILD_TIMEOUT_S} s") from exc
    if done.returncode != 0:
        raise NativeToolError(f"go install {NATSCLI_MODULE}@{version} failed: {done.stderr.strip()[-800:]}")
    os.replace(build / "nats", binary)  # only a complete build ever has the final name
    shutil.rmtree(build, ignore_errors=True)
    return binary


def natscli_version(binary: Path) -> str:
    done = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30)
    return (done.stdout or done.stderr).strip()


def parse_nats_bench_csv(text: str) -> list[dict[str, float | str]]:
    """`nats bench … --csv` rows: rates in msgs/s, latencies in µs (publisher and requester rows carry them)."""
    rows = list(csv.DictReader(io.StringIO(text.lstrip("#"))))
    if not rows:
        raise NativeToolError("nats bench wrote an empty CSV")
    return [{k: v if k in ("RunID", "ClientID") else float(v) for k, v in row.items()} for row in rows]


def latency_percentiles_ms(raw: str, percentiles: Sequence[float] = (50, 99)) -> dict[str, float]:
    """Exact percentiles (nearest rank, like HdrHistogram's) of `nats latency --histogram`'s raw file: one
    latency in ms per line, every message of the run."""
    values = np.array(raw.split(), dtype=np.float64)
    if values.size == 0:
        raise NativeToolError("nats latency recorded no message")
    return {f"{p:g}": float(np.percentile(values, p, method="inverted_cdf")) for p in percentiles} | {
        "count": float(values.size)
    }
