"""Kafka releases from Maven Central: every `org.apache.kafka:kafka_2.13` release from 2.4.0 on is listed
(`list_releases`, each marked with the module Central does not serve yet, if any: `central.py`), and any of them
is assembled on demand: its runtime classpath resolved by Maven into `<cache>/kafka/<version>/libs/`, plus the
logging backend the pom leaves out (the tarball ships log4j 1 for 2.x, reload4j for 3.x and log4j2 for 4.x), with a
manifest of jar names and sha256 digests checked before every use, so a truncated or tampered jar is reported by
name instead of surfacing as a ClassNotFoundError mid-benchmark. The same classpath holds the release's own
ZooKeeper (its `org.apache.zookeeper` dependency), which releases before 3.3 run with (`modes.py`).

Why Central and not the release tarball: Central is the artefact store the harness can always reach, and it keeps
every release. The `kafka-tools` classpath (for the version probe) is fetched the same way.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import sys
import tempfile
import time
import urllib.request
import uuid
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ...brokers.maven import copy_dependencies
from ...classdata import java_digest
from ...errors import BrokerError
from ...paths import cache_dir
from ...releases import LATEST, Release, known
from .central import MAVEN_CENTRAL, Unreachable, missing_modules
from .modes import mode_of

SYSTEM = "kafka"  # the system's name (`System.name`), which keys its cached release list

_log = logging.getLogger(__name__)

KAFKA_ARTIFACT = "org.apache.kafka:kafka_2.13"
OLDEST = "2.4.0"  # the first kafka_2.13 release (Scala 2.13 builds began with Kafka 2.4)
SOURCE = f"Maven Central ({KAFKA_ARTIFACT})"


# Where each release line keeps its storage tool; the first class found in the jars is recorded in the manifest.
_STORAGE_TOOL_CLASSES = ("kafka.tools.StorageTool", "org.apache.kafka.tools.StorageTool")


# Logging backends the Kafka tarballs ship but the pom does not bring (Maven coordinates, per release line).
_RELOAD4J = ("org.slf4j:slf4j-reload4j:1.7.36", "ch.qos.reload4j:reload4j:1.2.25")


_LOG4J2 = ("org.apache.logging.log4j:log4j-slf4j-impl:2.24.3", "org.apache.logging.log4j:log4j-core:2.24.3")


_MANIFEST_VERSION = 1  # 1: version, artifact, logging, storage_tool, jars {name: sha256}, fetched_at


_METADATA_MAX_AGE_S = 24 * 3600


_MVN_TIMEOUT_S = 1800


def available_versions(max_age_s: float = _METADATA_MAX_AGE_S, offline_ok: bool = True) -> list[str]:
    """Releases of kafka_2.13 listed on Maven Central, newest first (the answer is cached for `max_age_s`).

    Listed is not the same as complete: a release can be listed before all its modules are published
    (`list_releases` says which). An unreachable Central falls back to the cached list, however old, when
    `offline_ok`; otherwise it is a BrokerError (the release catalogue then says it used its own cache).
    """
    cached = cache_dir() / "kafka" / "maven-metadata.xml"
    fresh = cached.exists() and time.time() - cached.stat().st_mtime < max_age_s
    if not fresh:
        try:
            _download(f"{MAVEN_CENTRAL}/{_artifact_path(KAFKA_ARTIFACT)}/maven-metadata.xml", cached)
        except OSError as exc:
            if not cached.exists() or not offline_ok:
                raise BrokerError(f"cannot list Kafka releases on Maven Central: {exc}") from exc
            _log.warning("Maven Central unreachable (%s); using the cached release list", exc)
    try:
        root = ET.fromstring(cached.read_text())
    except ET.ParseError as exc:
        cached.unlink(missing_ok=True)
        raise BrokerError(f"Maven Central sent an unreadable maven-metadata.xml: {exc}") from exc
    versions = {v.text.strip() for v in root.iterfind("./versioning/versions/version") if v.text}
    return sorted(versions, key=version_key, reverse=True)


def list_releases() -> list[Release]:
    """Every kafka_2.13 release on Central from 2.4.0 on, newest first, each marked with the Kafka module Central does
    not serve (so it cannot be assembled) if any. BrokerError when Central cannot be asked."""
    versions = [v for v in available_versions(max_age_s=0, offline_ok=False) if version_key(v) >= version_key(OLDEST)]
    try:
        missing = missing_modules(versions)
    except Unreachable as exc:
        raise BrokerError(f"cannot check the Kafka releases' modules on Maven Central: {exc}") from exc
    return [Release(v, SOURCE, _not_served(missing[v])) for v in versions]


def newest_release() -> str:
    """The newest release that can be assembled, from the cached release list (Central is asked when nothing is
    cached): what the version probe's tools and `make`'s class-data archive default to."""
    return known(SYSTEM, list_releases).resolve(LATEST)


def _not_served(coordinates: str | None) -> str | None:
    return None if coordinates is None else f"{coordinates} is not on Maven Central"


def kafka_classpath(version: str, refetch: bool = False) -> Path:
    """The verified `libs/` folder of `version` (run with `-cp 'libs/*'`), fetched on first use or when `refetch`.

    Verification failures raise BrokerError naming the jar; `refetch=True` (or deleting the version's folder)
    replaces the folder atomically with a fresh download.
    """
    return release_of(version, refetch).libs


@dataclass(frozen=True)
class VerifiedRelease:
    """A verified release in the cache: what a node needs to run it."""

    libs: Path
    storage_tool: str | None  # main class of the storage formatter (None: a ZooKeeper-era release, never formatted)
    logging: str  # "log4j2" or "reload4j": which config file the JVM is pointed at
    digest: str  # sha256 of the manifest, so of the exact jar set


def release_of(version: str, refetch: bool = False) -> VerifiedRelease:
    home = _release_dir(version)
    if refetch or not home.exists():
        _fetch(version, home)
    manifest = _verify(home, version)
    digest = _sha256_bytes((home / "manifest.json").read_bytes())
    return VerifiedRelease(home / "libs", manifest.get("storage_tool"), manifest["logging"], digest)


def class_archive(release: VerifiedRelease, java: str) -> Path:
    """Where the class-data archive of `release`'s classpath run by `java` lives (bench_tasks.classdata; made by
    systems.kafka.classdata): beside its libs/, so that a re-fetch, a new folder, drops it with the jars it holds."""
    return release.libs.parent / f"classes-{java_digest(java)}.jsa"


def _release_dir(version: str) -> Path:
    if not re.fullmatch(r"[0-9][0-9A-Za-z.\-]*", version):
        raise BrokerError(f"not a Kafka version: {version!r}")
    return cache_dir() / "kafka" / version


def _fetch(version: str, home: Path) -> None:
    """Resolve the classpath with Maven into a temporary folder next to `home`, then rename it into place."""
    home.parent.mkdir(parents=True, exist_ok=True)
    print(f"fetching Kafka {version} from Maven Central into {home} (mvn; this takes a while)", file=sys.stderr)
    began = time.monotonic()
    build = Path(tempfile.mkdtemp(prefix=f".{version}-fetch-", dir=home.parent))
    try:
        libs = build / "libs"
        _copy_dependencies(version, build / "pom", libs)
        shutil.rmtree(build / "pom")
        manifest = _make_manifest(version, libs)
        (build / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        _install(build, home)
    finally:
        shutil.rmtree(build, ignore_errors=True)
    size_mb = sum(p.stat().st_size for p in (home / "libs").iterdir()) / 1e6
    took = time.monotonic() - began
    print(f"fetched Kafka {version}: {len(manifest['jars'])} jars, {size_mb:.0f} MB in {took:.1f}s", file=sys.stderr)


def _copy_dependencies(version: str, pom_dir: Path, libs: Path, coordinates: Sequence[str] = ()) -> None:
    """`mvn dependency:copy-dependencies` on a generated pom: the release's runtime scope plus a logging backend
    (or the given `coordinates` instead)."""
    pom_dir.mkdir(parents=True)
    coordinates = list(coordinates) or [f"{KAFKA_ARTIFACT}:{version}", *_logging_backend(version)[1]]
    (pom_dir / "pom.xml").write_text(_pom(coordinates))
    copy_dependencies(pom_dir / "pom.xml", libs, _MVN_TIMEOUT_S, f"Kafka {version}", BrokerError)


def _pom(coordinates: Iterable[str]) -> str:
    deps = "".join(
        f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version></dependency>\n"
        for g, a, v in (c.split(":") for c in coordinates)
    )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0">\n<modelVersion>4.0.0</modelVersion>\n'
        "<groupId>sixnines</groupId><artifactId>kafka-runtime</artifactId><version>0</version>"
        f"<packaging>pom</packaging>\n<dependencies>\n{deps}</dependencies>\n</project>\n"
    )


def _logging_backend(version: str) -> tuple[str, tuple[str, ...]]:
    """Kafka 4 moved from log4j 1 to log4j2; both bind slf4j 1.7, which the pom brings. 2.x tarballs ship log4j
    1.2.17 itself, which Kafka's own log4j controller (an MBean every broker registers) calls directly: reload4j is
    its drop-in successor, so 2.x and 3.x share one backend."""
    return ("log4j2", _LOG4J2) if version_key(version) >= (4,) else ("reload4j", _RELOAD4J)


def _make_manifest(version: str, libs: Path) -> dict[str, Any]:
    jars = {p.name: _sha256_file(p) for p in sorted(libs.glob("*.jar"))}
    if f"kafka_2.13-{version}.jar" not in jars:
        raise BrokerError(f"Maven resolved no kafka_2.13-{version}.jar into {libs}")
    logging_name, logging_coords = _logging_backend(version)
    return {
        "manifest_version": _MANIFEST_VERSION,
        "version": version,
        "artifact": f"{KAFKA_ARTIFACT}:{version}",
        "logging": logging_name,
        "logging_artifacts": list(logging_coords),
        "storage_tool": _find_storage_tool(libs) if mode_of(version) == "kraft" else None,
        "jars": jars,
        "fetched_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def _find_storage_tool(libs: Path) -> str:
    """The storage tool's class differs between release lines; look for each known name in the jars."""
    wanted = {name.replace(".", "/") + ".class": name for name in _STORAGE_TOOL_CLASSES}
    found: set[str] = set()
    for jar in libs.glob("*.jar"):
        with zipfile.ZipFile(jar) as archive:
            found.update(wanted[entry] for entry in archive.namelist() if entry in wanted)
    for name in _STORAGE_TOOL_CLASSES:
        if name in found:
            return name
    raise BrokerError(f"no Kafka storage tool ({', '.join(_STORAGE_TOOL_CLASSES)}) in the jars of {libs}")


def _install(build: Path, home: Path) -> None:
    """Rename the finished folder into place; a replaced folder is moved aside first and then deleted."""
    old = None
    if home.exists():
        old = home.with_name(f".{home.name}-old-{uuid.uuid4().hex[:8]}")
        home.rename(old)
    try:
        build.rename(home)
    except OSError:
        if not home.exists():
            raise
        # Another process installed the same release meanwhile; its copy is verified like ours would be.
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _verify(home: Path, version: str) -> dict[str, Any]:
    """Check every jar against the manifest: none missing, none extra (`libs/*` would load it), digests equal."""
    refetch = f"re-fetch with kafka_classpath({version!r}, refetch=True) or delete {home}"
    manifest_path = home / "manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text())
        jars: dict[str, str] = manifest["jars"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BrokerError(
            f"Kafka {version} cache has no readable manifest ({manifest_path}): {exc}; {refetch}"
        ) from exc
    if manifest.get("version") != version or manifest.get("manifest_version") != _MANIFEST_VERSION:
        raise BrokerError(
            f"{manifest_path} is not a version {_MANIFEST_VERSION} manifest of Kafka {version}; {refetch}"
        )
    libs = home / "libs"
    present = {p.name for p in libs.glob("*.jar")}
    problems = [f"missing {name}" for name in sorted(set(jars) - present)]
    problems += [f"unexpected {name}" for name in sorted(present - set(jars))]
    problems += [f"sha256 mismatch {n}" for n in sorted(set(jars) & present) if _sha256_file(libs / n) != jars[n]]
    if problems:
        raise BrokerError(f"Kafka {version} classpath {libs} failed verification: {'; '.join(problems)}; {refetch}")
    return manifest


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _download(url: str, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with urllib.request.urlopen(url, timeout=30) as resp:
        data = resp.read()
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    partial.write_bytes(data)
    partial.rename(target)


def _artifact_path(artifact: str) -> str:
    group, name = artifact.split(":")
    return f"{group.replace('.', '/')}/{name}"


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version))


# Kafka's wire protocol carries no software version; what a cluster does report is its features (KIP-584), and
# `metadata.version` names the release line (`4.3-IV0`: Kafka 4.3). Kafka's own `kafka-features.sh describe`
# (org.apache.kafka.tools.FeatureCommand, Admin API DescribeFeatures) reads them. It lives in the kafka-tools
# artifact, which the broker's classpath does not bring, so that artifact's runtime classpath is fetched once with
# Maven into `<cache>/kafka-tools/<version>/` (about 85 jars, 43 MB; a sha256 manifest checked before every use),
# from the newest release the harness knows, so it can name every level the clusters it meets report.
TOOLS_ARTIFACT = "org.apache.kafka:kafka-tools"


def tools_classpath(version: str) -> Path:
    """The verified `libs/` folder of kafka-tools `version` (fetched with Maven on first use)."""
    if not re.fullmatch(r"[0-9][0-9A-Za-z.\-]*", version):
        raise BrokerError(f"not a Kafka version: {version!r}")
    home = cache_dir() / "kafka-tools" / version
    if not home.exists():
        home.parent.mkdir(parents=True, exist_ok=True)
        print(f"fetching {TOOLS_ARTIFACT}:{version} from Maven Central into {home} (mvn)", file=sys.stderr)
        build = Path(tempfile.mkdtemp(prefix=f".{version}-fetch-", dir=home.parent))
        try:
            libs = build / "libs"
            _copy_dependencies(version, build / "pom", libs, [f"{TOOLS_ARTIFACT}:{version}"])
            shutil.rmtree(build / "pom")
            manifest = {
                "manifest_version": _MANIFEST_VERSION,
                "version": version,
                "artifact": f"{TOOLS_ARTIFACT}:{version}",
                "jars": {p.name: _sha256_file(p) for p in sorted(libs.glob("*.jar"))},
                "fetched_at": datetime.now(UTC).isoformat(timespec="seconds"),
            }
            (build / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
            _install(build, home)
        finally:
            shutil.rmtree(build, ignore_errors=True)
    _verify(home, version)
    return home / "libs"
