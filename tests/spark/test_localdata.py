"""Driver-made frames are local relations: reading them starts no Spark job (a Python RDD started tasks in
Python workers for every read, a fixed cost in every analysis)."""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from spark_jobs.localdata import rows_frame


def _jobs(spark: SparkSession) -> int:
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(None))


def test_rows_become_a_local_relation_read_without_a_job(spark: SparkSession) -> None:
    frame = rows_frame(spark, [(2, "b", [1, 2]), (1, None, [])], "unit long, name string, codes array<int>")
    assert "LocalRelation" in frame._jdf.queryExecution().optimizedPlan().toString()
    before = _jobs(spark)
    rows = frame.where(F.col("unit") > 0).collect()
    assert _jobs(spark) == before
    assert sorted(tuple(r) for r in rows) == [(1, None, []), (2, "b", [1, 2])]
    assert frame.schema.simpleString() == "struct<unit:bigint,name:string,codes:array<int>>"


def test_no_rows_keep_their_columns_and_broadcast_joins_read_them(spark: SparkSession) -> None:
    empty = rows_frame(spark, [], "unit long, flag boolean")
    assert empty.columns == ["unit", "flag"] and empty.count() == 0
    keys = rows_frame(spark, [(1, True)], "unit long, flag boolean")
    joined = spark.range(3).withColumnRenamed("id", "unit").join(F.broadcast(keys), "unit", "left")
    assert sorted((r.unit, r.flag) for r in joined.collect()) == [(0, None), (1, True), (2, None)]
