"""Chronicle Queue releases from Maven Central: `net.openhft:chronicle-queue`, listed from its maven-metadata.xml,
each release's runtime jars resolved by Maven into `<cache>/chronicle/<version>/libs/` with a manifest of their
sha256 digests, checked before every use (a truncated jar is named, not found mid-benchmark).

Listed are releases numbered as releases (5.22.28, 2026.4); early-access builds (5.22ea14, the seed's) are not, as
their numbering is no release order. Every listed release from the 5.22 line on was written for Java 17 and runs
here with the library's documented `--add-exports`/`--add-opens` flags (`JAVA17_FLAGS`); older lines are listed
with what is missing.
"""

from __future__ import annotations

import urllib.request
import xml.etree.ElementTree as ET
from pathlib import Path

from ...brokers.maven import verified_libs
from ...errors import BrokerError
from ...paths import cache_dir
from ...releases import Release, is_version, version_key

ARTIFACT = "net.openhft:chronicle-queue"
MAVEN_CENTRAL = "https://repo.maven.apache.org/maven2"
METADATA_URL = f"{MAVEN_CENTRAL}/net/openhft/chronicle-queue/maven-metadata.xml"
SOURCE = "Maven Central net.openhft:chronicle-queue"
OLDEST_ON_JAVA17 = "5.22"  # the first line published for Java 17 (earlier lines ran on 8 and 11)
FETCH_TIMEOUT_S = 900.0
# The JVM options Chronicle's documentation gives for Java 17: the library reaches into JDK internals.
JAVA17_FLAGS = (
    "--add-exports=java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-exports=jdk.unsupported/sun.misc=ALL-UNNAMED",
    "--add-exports=jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED",
    "--add-opens=jdk.compiler/com.sun.tools.javac=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
)


def list_releases() -> list[Release]:
    """Every release Maven Central lists, newest first; lines before 5.22 marked with why they are not run."""
    with urllib.request.urlopen(METADATA_URL, timeout=30) as response:
        root = ET.fromstring(response.read())
    listed = [v.text.strip() for v in root.iterfind("./versioning/versions/version") if v.text]
    out = []
    for version in sorted({v for v in listed if is_version(v)}, key=version_key, reverse=True):
        old = version_key(version) < version_key(OLDEST_ON_JAVA17)
        missing = f"before the {OLDEST_ON_JAVA17} line, which is the first published for Java 17" if old else None
        out.append(Release(version, SOURCE, missing))
    return out


def release_dir(version: str) -> Path:
    return cache_dir() / "chronicle" / version


def libs(version: str) -> Path:
    """The verified `libs/` folder of `version` (every runtime jar), fetched on first use."""
    return verified_libs(ARTIFACT, version, release_dir(version), BrokerError, FETCH_TIMEOUT_S)
