"""Spark settings that must be known when the driver JVM starts, shared by every way a job is launched: a
session the jobs start themselves (spark_jobs.session) and spark-submit from Airflow (plugins' tail).

Kept free of pyspark so DAG files can import it at parse time.
"""

from __future__ import annotations

import sys
from importlib.metadata import version
from pathlib import Path

from bench_tasks.classdata import find_java, java_digest, use_flags

# The analysis is a throughput job: the parallel collector cost 10-15 % less CPU than G1 here (bench/).
JVM_OPTIONS = "-XX:+UseParallelGC"

SUBMIT_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.driver.extraJavaOptions": JVM_OPTIONS,
    "spark.executor.extraJavaOptions": JVM_OPTIONS,
    # An analysis compiles 300-400 classes of generated code; Spark keeps 100 by default, so a second run in
    # the same application (several runs per submit, the benchmark's sizes) compiled, and the JVM warmed up,
    # nearly all of them again. A static setting: known when the session starts.
    "spark.sql.codegen.cache.maxEntries": "2000",
}

# A small run is analysed faster by a driver whose JIT stops at its first tier (C1): on two cores the second
# tier's compiling costs more than it earns back in so short a job, and a large run needs it. One cold analysis
# each (bench/spark_percentiles.py's synthetic runs, local[2]): 1 M messages 24.4 s with C1 only against 28.8 s,
# 3 M 38.5 s against 34.0 s, 10 M 63 s against 41 s; `make bench`'s 70,000: 25.1 and 23.6 s against 30.3 and 28.2 s.
SMALL_RUN_MESSAGES = 1_000_000
FIRST_TIER_ONLY = "-XX:TieredStopAtLevel=1"

# A larger run's driver keeps the second tier for the code that reads the samples, and spends it on little else.
# A cold 10 M-message analysis took ~50 JVM CPU-seconds where the same lake analyzed again in the same JVM took ~21:
# the JIT's compiler threads alone used ~33 (`-XX:+CITime`), and by `-XX:+LogCompilation` most of the second tier's
# time went to the driver's planning machinery (Janino, Catalyst, ANTLR, closure and task serialization), not to
# generated code. So the second tier waits for three times the calls (the samples' loops reach any threshold
# within a second; planning code, called thousands of times, mostly stays at the first tier), inlines less of
# what is already compiled, and never takes the classes that only plan, compile or ship work (C2_EXCLUDED: they
# run at the first tier). Cold 10 M analyses, fresh JVMs alternated (load 2.3-3.3; docs/design.md, "Decisions:
# the analysis"): tables 24.4 and 26.2 s without, 22.0 and 23.1 s with; with spark_jobs.codegen as well, the
# second tier's logged compile time went from 30.9 s to 15.8 s.
C2_EXCLUDED = Path(__file__).with_name("c2_excluded.json")
PIPELINE = Path(__file__).with_name("pipeline.py")  # the analysis application spark-submit runs
SECOND_TIER_THRIFT = (
    "-XX:Tier4InvocationThreshold=15000",
    "-XX:Tier4MinInvocationThreshold=1800",
    "-XX:Tier4CompileThreshold=45000",
    "-XX:InlineSmallCode=1000",
    "-XX:+UnlockDiagnosticVMOptions",
    f"-XX:CompilerDirectivesFile={C2_EXCLUDED}",
    "-XX:+DisplayVMOutputToStderr",  # the JVM's own lines ("1 compiler directives added"): stdout may be a command's
)


def submit_conf(messages: int | None = None) -> dict[str, str]:
    """SUBMIT_CONF for a run of `messages` measure-phase messages (its cells rows' `sent`): the driver's JIT
    stops at the first tier up to SMALL_RUN_MESSAGES; a larger one, or None (not known), keeps both tiers and
    spends the second on the samples' code (SECOND_TIER_THRIFT); a cluster's executors keep the JVM's defaults.
    The driver maps this host's class-data archive when one was made (`make` does: spark_jobs.classdata), and so
    do the executors of a standalone cluster on this host: their JVMs load the same jars from the same pyspark.
    An executor on another host, where no such file is, starts as before (the JVM ignores a missing or foreign
    archive)."""
    small = messages is not None and messages <= SMALL_RUN_MESSAGES
    archive = driver_archive_flags()
    options = (JVM_OPTIONS, *((FIRST_TIER_ONLY,) if small else SECOND_TIER_THRIFT), *archive)
    return {
        **SUBMIT_CONF,
        "spark.driver.extraJavaOptions": " ".join(options),
        "spark.executor.extraJavaOptions": " ".join((JVM_OPTIONS, *archive)),
    }


def driver_archive() -> Path | None:
    """Where this installation keeps the class-data archive of its Spark driver (bench_tasks.classdata): beside
    the interpreter whose pyspark jars it archives, named after the pyspark release and the `java` spark-submit
    runs (`$JAVA_HOME/bin/java`, else the first on PATH). None without a java."""
    java = find_java()
    if java is None:
        return None
    return Path(sys.prefix) / "share" / "sixnines" / f"spark-driver-{version('pyspark')}-{java_digest(java)}.jsa"


def driver_archive_flags() -> tuple[str, ...]:
    """The driver's flag mapping its archive, or none while it is not made."""
    archive = driver_archive()
    return () if archive is None else use_flags(archive)
