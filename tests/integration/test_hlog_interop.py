"""Interop: our interval logs must read correctly in the reference implementation (Java HdrHistogram's
HistogramLogProcessor, the engine behind HistogramLogAnalyzer), not only in our own reader."""

from __future__ import annotations

import csv
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from bench_tasks.core.hdr import write_hlog
from bench_tasks.paths import cache_dir

pytestmark = pytest.mark.alongside

HDR_JAVA = "org.hdrhistogram:HdrHistogram:2.2.2"


@pytest.fixture(scope="module")
def hdr_jar() -> Path:
    if not (shutil.which("java") and shutil.which("mvn")):
        pytest.fail("java and mvn are part of this project's toolchain (see README) but are not on PATH")
    folder = cache_dir() / "tools"
    jar = folder / "HdrHistogram-2.2.2.jar"
    if not jar.exists():
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["mvn", "-q", "dependency:copy", f"-Dartifact={HDR_JAVA}", f"-DoutputDirectory={folder}"],
            check=True,
            capture_output=True,
            timeout=600,
        )
    return jar


def java_distribution(jar: Path, hlog: Path, tag: str, out: Path) -> list[dict[str, float]]:
    subprocess.run(
        [
            "java",
            "-cp",
            str(jar),
            "org.HdrHistogram.HistogramLogProcessor",
            "-i",
            str(hlog),
            "-tag",
            tag,
            "-outputValueUnitRatio",
            "1e6",
            "-csv",
            "-o",
            str(out),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    with open(f"{out}.hgrm") as f:
        rows = [r for r in csv.DictReader(line for line in f if not line.startswith("#"))]
    return [
        {"value_ms": float(r["Value"]), "percentile": float(r["Percentile"]), "count": float(r["TotalCount"])}
        for r in rows
    ]


def test_java_hdrhistogram_reads_our_interval_log(tmp_path: Path, hdr_jar: Path) -> None:
    rng = np.random.default_rng(7)
    n = 20_000
    at_ns = np.sort(rng.integers(0, 10_000_000_000, n))  # 10 s of samples
    latency_ns = (rng.lognormal(mean=np.log(2e6), sigma=0.6, size=n)).astype(np.int64)  # ~2 ms
    other_ns = latency_ns // 2
    hlog = tmp_path / "cell.hlog"
    write_hlog(hlog, {"e2e-intended": (at_ns, latency_ns), "e2e-sent": (at_ns, other_ns)}, t0_ns=0, wall_t0_s=1e9)

    for tag, values in (("e2e-intended", latency_ns), ("e2e-sent", other_ns)):
        rows = java_distribution(hdr_jar, hlog, tag, tmp_path / tag)
        assert rows[-1]["count"] == n  # every sample of every interval, and only this tag's
        assert rows[-1]["value_ms"] == pytest.approx(values.max() / 1e6, rel=1e-3)
        # The processor prints percentile ticks, not p99 itself: the exact p99 must lie between the ticks
        # around 0.99 (3 significant digits, printed in µs).
        below = max((r for r in rows if r["percentile"] <= 0.99), key=lambda r: r["percentile"])
        above = min((r for r in rows if r["percentile"] >= 0.99), key=lambda r: r["percentile"])
        p99_exact = np.quantile(values, 0.99, method="inverted_cdf") / 1e6
        assert below["value_ms"] * (1 - 2e-3) <= p99_exact <= above["value_ms"] * (1 + 2e-3)
        assert above["value_ms"] / below["value_ms"] < 1.05  # the ticks are close, so the check has teeth


@pytest.mark.parametrize(("n", "sigma"), [(1, 0.1), (7, 0.3), (5_000, 0.8), (100_000, 2.0)])
def test_our_hgrm_is_javas_percentile_distribution_line_by_line(
    tmp_path: Path, hdr_jar: Path, n: int, sigma: float
) -> None:
    """Java's HistogramLogProcessor prints the accumulated histogram of an interval log with
    outputPercentileDistribution; our `.hgrm` of the same samples must be that text exactly (after the two
    `#[` lines the processor puts on top: the time range and StartTime)."""
    from bench_tasks.interop.hgrm import hgrm_of

    rng = np.random.default_rng(n)
    at_ns = np.sort(rng.integers(0, 900_000_000, n))  # one interval: the processor's histogram is all of them
    latency_ns = rng.lognormal(mean=np.log(1.5e6), sigma=sigma, size=n).astype(np.int64)
    hlog = tmp_path / "cell.hlog"
    write_hlog(hlog, {"e2e-intended": (at_ns, latency_ns)}, t0_ns=0, wall_t0_s=1e9)
    out = tmp_path / "java"
    processor = ["java", "-cp", str(hdr_jar), "org.HdrHistogram.HistogramLogProcessor"]
    subprocess.run(
        [*processor, "-i", str(hlog), "-tag", "e2e-intended", "-outputValueUnitRatio", "1e6", "-o", str(out)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    java = Path(f"{out}.hgrm").read_text().splitlines()
    assert java[0].startswith("#[Overall percentile distribution") and java[1].startswith("#[StartTime")
    ours = hgrm_of(latency_ns).splitlines()
    assert len(ours) == len(java) - 2
    for number, (mine, theirs) in enumerate(zip(ours, java[2:], strict=True), 1):
        assert mine == theirs, f"line {number}"
