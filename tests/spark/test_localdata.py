"""Driver-made frames are local relations: reading them starts no Spark job (a Python RDD started tasks in
Python workers for every read, a fixed cost in every analysis)."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, IntegerType, LongType, StringType

from spark_jobs.localdata import literal_array, rows_frame


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


def test_a_literal_array_is_the_constant_an_array_of_literals_is(spark: SparkSession) -> None:
    """literal_array (one py4j call) must give the values, nulls and element type that F.array of F.lit gave,
    and stay a constant the optimizer folds (indexed per row like the unit facts)."""
    cases = [
        ([1_795_707_875_900_000_000, None, -3, 0], LongType()),
        ([7, None, 2], IntegerType()),
        ([True, None, False], BooleanType()),
        ([], LongType()),
    ]
    for values, kind in cases:
        made = spark.range(1).select(literal_array(values, kind).alias("a"))
        assert made.schema["a"].dataType.elementType == kind
        assert made.collect()[0]["a"] == values
        plan = made._jdf.queryExecution().optimizedPlan().toString()
        assert "array(" not in plan and "cast(" not in plan.lower(), plan  # folded into one literal
    index = F.col("id").cast("int") + 1
    indexed = spark.range(4).select(F.try_element_at(literal_array([10, None, 30], LongType()), index))
    assert [r[0] for r in indexed.collect()] == [10, None, 30, None]
    with pytest.raises(TypeError):
        literal_array(["x"], StringType())  # type: ignore[list-item]
