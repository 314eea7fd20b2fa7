"""spark_jobs.codegen: an analysis interprets its queries over local data and compiles those over raw rows; the
switch decides how the next action runs and is undone after it, and both ways give the same rows."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_jobs.codegen import FACTORY_MODE, WHOLE_STAGE, compiled, interpreted


def _query(spark: SparkSession) -> DataFrame:
    rows = spark.range(0, 20_000, numPartitions=2).select((F.col("id") % 7).alias("k"), (F.col("id") * 3).alias("v"))
    return rows.groupBy("k").agg(F.sum("v").alias("total"), F.max("v").alias("top")).orderBy("k")


def _compiled_stages(frame: DataFrame) -> int:
    """How many whole-stage generated stages the executed plan holds (after the action: AQE's final plan)."""
    plan = frame._jdf.queryExecution().executedPlan().toString()
    return plan.count("*(")  # the explain string marks each operator of a generated stage with *(n)


def test_interpreted_runs_without_generated_stages_and_compiled_inside_it_with_them(spark: SparkSession) -> None:
    with interpreted(spark):
        plain = _query(spark)
        plain_rows = plain.collect()
        with compiled(spark):
            generated = _query(spark)
            generated_rows = generated.collect()
        again = _query(spark)
        again.collect()
    assert plain_rows == generated_rows and len(plain_rows) == 7
    assert plain_rows[0]["total"] == sum(3 * i for i in range(0, 20_000, 7))
    assert _compiled_stages(plain) == 0 and _compiled_stages(again) == 0
    assert _compiled_stages(generated) > 0


def test_the_session_s_settings_are_restored_after_each_switch(spark: SparkSession) -> None:
    spark.conf.unset(FACTORY_MODE)
    spark.conf.set(WHOLE_STAGE, "true")
    with interpreted(spark):
        assert spark.conf.get(WHOLE_STAGE) == "false" and spark.conf.get(FACTORY_MODE) == "NO_CODEGEN"
        with compiled(spark):
            assert spark.conf.get(WHOLE_STAGE) == "true" and spark.conf.get(FACTORY_MODE) == "FALLBACK"
        assert spark.conf.get(FACTORY_MODE) == "NO_CODEGEN"
    assert spark.conf.get(WHOLE_STAGE) == "true"
    assert spark.conf.get(FACTORY_MODE, None) in (None, "FALLBACK")  # unset again: Spark's default
