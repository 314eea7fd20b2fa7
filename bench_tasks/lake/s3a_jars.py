"""The jars Spark needs to read and write `s3a://`: hadoop-aws and the AWS SDK bundle, from Maven Central.

The pyspark wheel ships Hadoop's client jars but not its S3 connector. hadoop-aws must be exactly the version
of the Hadoop inside the wheel (read from its `hadoop-client-api-X.Y.Z.jar`), and its pom names the AWS SDK
bundle it was built against, so Maven resolves hadoop-aws's runtime scope (the bundle included) rather than
the harness pinning an SDK version. Fetched once into `<cache>/s3a/<hadoop version>/` (a temporary folder
renamed into place, as Kafka's jars are), then passed as `spark.jars` / `--jars`.
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

from ..brokers.maven import copy_dependencies
from ..paths import cache_dir
from .s3conf import StorageError

_MVN_TIMEOUT_S = 900  # the SDK bundle is ~700 MB


def pyspark_hadoop_version() -> str:
    """The Hadoop version bundled in the installed pyspark (`jars/hadoop-client-api-<version>.jar`)."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    found = sorted(re.findall(r"hadoop-client-api-(\d[\w.\-]*)\.jar", " ".join(p.name for p in jars.glob("*.jar"))))
    if not found:
        raise StorageError(f"no hadoop-client-api-*.jar in {jars}: cannot tell which hadoop-aws matches pyspark")
    return found[-1]


def s3a_jars(hadoop_version: str | None = None) -> list[Path]:
    """hadoop-aws and its runtime dependencies (the AWS SDK bundle) for `hadoop_version`, fetched if missing."""
    version = hadoop_version or pyspark_hadoop_version()
    home = cache_dir() / "s3a" / version
    if not (home / "complete").exists():
        _fetch(version, home)
    jars = sorted((home / "libs").glob("*.jar"))
    if not any(j.name == f"hadoop-aws-{version}.jar" for j in jars):
        raise StorageError(f"{home}/libs: hadoop-aws-{version}.jar missing; delete {home} to fetch again")
    return jars


def spark_jars_conf(hadoop_version: str | None = None) -> str:
    """The `spark.jars` value (comma-separated local paths)."""
    return ",".join(str(j) for j in s3a_jars(hadoop_version))


def _fetch(version: str, home: Path) -> None:
    home.parent.mkdir(parents=True, exist_ok=True)
    print(f"fetching hadoop-aws {version} and the AWS SDK bundle from Maven Central into {home}", file=sys.stderr)
    began = time.monotonic()
    build = Path(tempfile.mkdtemp(prefix=f".{version}-fetch-", dir=home.parent))
    try:
        (build / "pom.xml").write_text(_pom(version))
        copy_dependencies(build / "pom.xml", build / "libs", _MVN_TIMEOUT_S, f"hadoop-aws {version}", StorageError)
        (build / "pom.xml").unlink()
        (build / "complete").write_text(f"hadoop-aws {version}\n")
        if home.exists():
            shutil.rmtree(home)
        build.rename(home)
    finally:
        shutil.rmtree(build, ignore_errors=True)
    size_mb = sum(p.stat().st_size for p in (home / "libs").iterdir()) / 1e6
    print(f"fetched hadoop-aws {version}: {size_mb:.0f} MB in {time.monotonic() - began:.1f}s", file=sys.stderr)


def _pom(version: str) -> str:
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0">\n<modelVersion>4.0.0</modelVersion>\n'
        "<groupId>sixnines</groupId><artifactId>s3a-runtime</artifactId><version>0</version>"
        "<packaging>pom</packaging>\n<dependencies>\n"
        "<dependency><groupId>org.apache.hadoop</groupId><artifactId>hadoop-aws</artifactId>"
        f"<version>{version}</version></dependency>\n</dependencies>\n</project>\n"
    )
