"""The tests' Spark driver, started by spark_jobs.session as every in-process session is, maps this installation's
class-data archive (made by `make`, spark_jobs.classdata): the kernel's map of the JVM's memory names the file."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from spark_jobs.launch import driver_archive


def test_the_driver_jvm_maps_the_class_data_archive(spark: SparkSession) -> None:
    archive = driver_archive()
    assert archive is not None and archive.is_file(), f"no {archive}: `make class-data` makes it"
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()  # type: ignore[union-attr]
    assert str(archive) in Path(f"/proc/{pid}/maps").read_text()
