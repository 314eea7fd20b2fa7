"""Which of an analysis's queries Spark compiles to Java, and which it interprets.

A cold analysis spent more CPU compiling than computing: a 10 M-message run on two cores used ~52 JVM CPU-seconds,
of which ~33 went to the JIT (`-XX:+CITime`), and most of that to the driver's own planning machinery made hot by
~290 generated classes (Janino, Catalyst, Spark's closure serialization; `-XX:+LogCompilation`), not to the code
that reads the samples. Only a few queries read the raw rows (the ledger's scan, the receipts of messages
received twice, the bucket and pick passes); every other query of an analysis handles local data of hundreds to
thousands of rows, for which interpreting the plan costs far less than generating, compiling and warming a class.

So an analysis runs `interpreted` and wraps each raw-row query (and the ledger's word table, a row per 64
messages) in `compiled`. Both settings are read when a query is planned and executed, and Spark hands them to the
executors with each job, so a switch around an action decides how that action runs. A cold 10 M analysis compiled
148 classes instead of 289, and its tables after the passes took 1.2-1.3 s instead of 1.8-1.9 s; at 10 M the
whole took 24.5 s against 24.9 s (two pairs, load 2.9-3.1), the rest being the JIT (spark_jobs.launch).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

from pyspark.sql import SparkSession

WHOLE_STAGE = "spark.sql.codegen.wholeStage"
FACTORY_MODE = "spark.sql.codegen.factoryMode"  # internal: FALLBACK (compile, interpret on failure) or NO_CODEGEN

COMPILED = {WHOLE_STAGE: "true", FACTORY_MODE: "FALLBACK"}
INTERPRETED = {WHOLE_STAGE: "false", FACTORY_MODE: "NO_CODEGEN"}


@contextmanager
def _settings(spark: SparkSession, settings: dict[str, str]) -> Iterator[None]:
    """The session's `settings` for the duration, restored after (unset where they were unset)."""
    earlier = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in earlier.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def compiled(spark: SparkSession) -> AbstractContextManager[None]:
    """Queries over raw rows (millions of them): whole-stage code generation, as Spark's default."""
    return _settings(spark, COMPILED)


def interpreted(spark: SparkSession) -> AbstractContextManager[None]:
    """Queries over local data: expressions evaluated by Spark's interpreter, no class generated."""
    return _settings(spark, INTERPRETED)
