"""One local SparkSession for the whole test session (JVM start-up is the slow part), two cores at most."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from spark_jobs.session import get_spark


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = get_spark(
        "sixnines-tests",
        "local[2]",
        {"spark.sql.shuffle.partitions": "2", "spark.sql.execution.arrow.pyspark.enabled": "true"},
    )
    yield session
    session.stop()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/spark/" in str(item.fspath):
            item.add_marker(pytest.mark.spark)
