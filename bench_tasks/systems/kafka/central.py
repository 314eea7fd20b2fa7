"""What Maven Central serves of a Kafka release: whether every Kafka module its broker's classpath needs is there.

Central lists a release (`maven-metadata.xml`) as soon as its first module is published, and the others can lag
(4.4.0 was listed for weeks without `kafka-tools-api`). A release is complete when the jar and pom of
`kafka_2.13` and of every `org.apache.kafka` module its poms depend on (compile and runtime scope, followed
transitively: `kafka-server-common`, `kafka-storage`, `kafka-tools-api`, …) are served. Third-party dependencies
(Scala, ZooKeeper, Jackson) are published long before a Kafka release and are not checked. `mvn` resolves the
same closure when the release is fetched (`release.py`); this check only costs a pom GET and a jar HEAD per module.

A complete release stays complete (Central never removes an artifact), so its answer is cached for good in
`<cache>/kafka/central/<version>.json`; an incomplete one is asked again at every listing.
"""

from __future__ import annotations

import http.client
import json
import os
import threading
import urllib.parse
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ...paths import cache_dir

MAVEN_CENTRAL = "https://repo.maven.apache.org/maven2"
KAFKA_GROUP = "org.apache.kafka"
_POM = "{http://maven.apache.org/POM/4.0.0}"
_RUNTIME_SCOPES = {"compile", "runtime"}
_CHECKS_AT_ONCE = 8
_TIMEOUT_S = 20.0
_CHECK_VERSION = 1  # 1: version, complete (only complete releases are remembered)


class Unreachable(OSError):
    """Central did not answer (not: answered that an artifact is absent)."""


def missing_modules(versions: list[str], root: str = "kafka_2.13") -> dict[str, str | None]:
    """Each version -> the first Kafka module (group:artifact:version) its classpath needs that Central does not
    serve, or None when it serves them all. Cached answers are used; the rest are asked in parallel."""
    answers: dict[str, str | None] = {v: None for v in versions}
    unknown = [v for v in versions if not _complete_before(v)]
    with ThreadPoolExecutor(_CHECKS_AT_ONCE) as pool:
        for version, missing in zip(unknown, pool.map(lambda v: _first_missing(root, v), unknown), strict=True):
            answers[version] = missing
            if missing is None:
                _remember(version)
    return answers


def _first_missing(root: str, version: str) -> str | None:
    """Walk the `org.apache.kafka` modules of `root`'s poms; the first whose pom or jar is absent."""
    seen: set[str] = set()
    todo = [(root, version)]
    while todo:
        artifact, wanted = todo.pop()
        if artifact in seen:
            continue
        seen.add(artifact)
        coordinates = f"{KAFKA_GROUP}:{artifact}:{wanted}"
        base = f"{MAVEN_CENTRAL}/{KAFKA_GROUP.replace('.', '/')}/{artifact}/{wanted}/{artifact}-{wanted}"
        pom = _get(f"{base}.pom")
        if pom is None or not _exists(f"{base}.jar"):
            return coordinates
        try:
            needed = kafka_dependencies(pom)
        except ET.ParseError as exc:
            raise Unreachable(f"{base}.pom: Central sent an unreadable pom ({exc})") from exc
        todo += [dep for dep in needed if dep[0] not in seen]
    return None


def kafka_dependencies(pom: bytes) -> list[tuple[str, str]]:
    """(artifact, version) of the `org.apache.kafka` dependencies a pom needs at run time (not test, provided or
    optional ones)."""
    found = []
    for dep in ET.fromstring(pom).iterfind(f"./{_POM}dependencies/{_POM}dependency"):
        group, artifact = dep.findtext(f"{_POM}groupId"), dep.findtext(f"{_POM}artifactId")
        version, scope = dep.findtext(f"{_POM}version"), dep.findtext(f"{_POM}scope") or "compile"
        optional = (dep.findtext(f"{_POM}optional") or "false").strip() == "true"
        if group == KAFKA_GROUP and artifact and version and scope in _RUNTIME_SCOPES and not optional:
            found.append((artifact.strip(), version.strip()))
    return found


def _get(url: str) -> bytes | None:
    """The body at `url`, or None when Central says it is not there; Unreachable when it does not answer."""
    status, body = _ask("GET", url)
    return body if status == 200 else None


def _exists(url: str) -> bool:
    return _ask("HEAD", url)[0] == 200


_local = threading.local()


def _ask(method: str, url: str) -> tuple[int, bytes]:
    """(status, body) of one request on this thread's kept-alive connection to Central (a TLS handshake per
    request made the first listing of 56 releases take a minute); 200 or 404, else Unreachable. A connection the
    server closed while it was kept alive is opened again once."""
    path = urllib.parse.urlsplit(url).path
    try:
        status, body = _request(method, path)
    except (OSError, http.client.HTTPException):
        _drop_connection()
        try:
            status, body = _request(method, path)
        except (OSError, http.client.HTTPException) as exc:
            _drop_connection()
            raise Unreachable(f"{url}: {exc}") from exc
    if status not in (200, 404):
        raise Unreachable(f"{url}: HTTP {status}")
    return status, body


def _request(method: str, path: str) -> tuple[int, bytes]:
    conn = getattr(_local, "conn", None)
    if conn is None:
        conn = _local.conn = http.client.HTTPSConnection(
            urllib.parse.urlsplit(MAVEN_CENTRAL).netloc, timeout=_TIMEOUT_S
        )
    conn.request(method, path, headers={"User-Agent": "sixnines"})
    resp = conn.getresponse()
    return resp.status, resp.read()


def _drop_connection() -> None:
    conn = getattr(_local, "conn", None)
    if conn is not None:
        conn.close()
    _local.conn = None


def _check_path(version: str) -> Path:
    return cache_dir() / "kafka" / "central" / f"{version}.json"


def _complete_before(version: str) -> bool:
    """Whether an earlier check found every module of the release on Central (then it still is)."""
    try:
        known = json.loads(_check_path(version).read_text())
    except (OSError, ValueError):
        return False
    return known.get("check_version") == _CHECK_VERSION and known.get("version") == version


def _remember(version: str) -> None:
    path = _check_path(version)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.partial")
    partial.write_text(json.dumps({"check_version": _CHECK_VERSION, "version": version, "complete": True}) + "\n")
    partial.replace(path)
