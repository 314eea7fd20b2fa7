"""The driver's second-tier exclusions (spark_jobs/c2_excluded.json) are a file this host's JVM accepts: a file it
cannot read or parse would stop the driver from starting at all."""

from __future__ import annotations

import json
import subprocess

from bench_tasks.classdata import find_java
from spark_jobs.launch import C2_EXCLUDED, SECOND_TIER_THRIFT


def test_the_jvm_accepts_the_driver_s_options_and_reads_the_exclusions() -> None:
    java = find_java()
    assert java is not None, "no java on this host"
    result = subprocess.run([str(java), *SECOND_TIER_THRIFT, "-version"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "1 compiler directives added" in result.stderr  # read, and said on stderr: stdout may be a command's
    assert "directives" not in result.stdout


def test_the_exclusions_name_only_planning_machinery_never_the_samples_code() -> None:
    """What runs per sample (generated classes, Spark's execution and unsafe code, Parquet) must keep the second
    tier: a pattern reaching it would slow every large analysis several times over."""
    (directive,) = json.loads(C2_EXCLUDED.read_text())
    assert directive["c2"] == {"Exclude": True}
    for pattern in directive["match"]:
        assert not pattern.startswith(("org/apache/spark", "org/apache/parquet", "*")), pattern
