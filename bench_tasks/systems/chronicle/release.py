"""Chronicle Queue releases from Maven Central: `net.openhft:chronicle-queue`, listed from its maven-metadata.xml,
each release's runtime jars resolved by Maven into `<cache>/chronicle/<version>/libs/` with a manifest of their
sha256 digests, checked before every use (a truncated jar is named, not found mid-benchmark).

Listed are releases numbered as releases (5.22.28, 2026.4); early-access builds (5.22ea14, the seed's) are not, as
their numbering is no release order. Every listed release from the 5.22 line on was written for Java 17 and runs
here with the library's documented `--add-exports`/`--add-opens` flags (`JAVA17_FLAGS`); older lines are listed
with what is missing.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import urllib.request
import xml.etree.ElementTree as ET
from pathlib import Path

from ...brokers.maven import copy_dependencies
from ...errors import BrokerError
from ...paths import cache_dir
from ...releases import Release, is_version, version_key

ARTIFACT = "net.openhft:chronicle-queue"
MAVEN_CENTRAL = "https://repo.maven.apache.org/maven2"
METADATA_URL = f"{MAVEN_CENTRAL}/net/openhft/chronicle-queue/maven-metadata.xml"
SOURCE = "Maven Central net.openhft:chronicle-queue"
OLDEST_ON_JAVA17 = "5.22"  # the first line published for Java 17 (earlier lines ran on 8 and 11)
FETCH_TIMEOUT_S = 900.0
_MANIFEST_VERSION = 1  # 1: version, artifact, jars {name: sha256}
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
    home = release_dir(version)
    if not (home / "manifest.json").exists():
        _fetch(version, home)
    _verify(home, version)
    return home / "libs"


def _fetch(version: str, home: Path) -> None:
    home.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=home.parent, prefix=f".{version}.") as tmp:
        build = Path(tmp)
        (build / "pom.xml").write_text(_pom(version))
        copy_dependencies(build / "pom.xml", build / "libs", FETCH_TIMEOUT_S, f"chronicle-queue {version}", BrokerError)
        jars = {p.name: _sha256(p) for p in sorted((build / "libs").glob("*.jar"))}
        manifest = {"manifest_version": _MANIFEST_VERSION, "version": version, "artifact": ARTIFACT, "jars": jars}
        (build / "manifest.json").write_text(json.dumps(manifest, indent=1))
        (build / "pom.xml").unlink()
        if home.exists():
            shutil.rmtree(home)
        build.rename(home)  # atomic: a half-fetched release is never used
        home.chmod(0o755)


def _pom(version: str) -> str:
    group, artifact = ARTIFACT.split(":")
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>sixnines</groupId><artifactId>chronicle-release</artifactId><version>1</version>
<dependencies><dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId><version>{version}</version>
</dependency></dependencies></project>
"""


def _verify(home: Path, version: str) -> None:
    manifest = json.loads((home / "manifest.json").read_text())
    if manifest.get("version") != version:
        raise BrokerError(f"{home}: manifest of chronicle-queue {manifest.get('version')}, expected {version}")
    for name, digest in manifest["jars"].items():
        jar = home / "libs" / name
        if not jar.exists() or _sha256(jar) != digest:
            raise BrokerError(f"chronicle-queue {version}: {jar} is missing or changed; delete {home} to fetch again")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
