"""Fetching jars from Maven Central with `mvn dependency:copy-dependencies` on a generated pom (Kafka releases,
Kafka's tools, hadoop-aws for s3a, client libraries of the JVM worker): one runner, so every fetch fails the same
readable way."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
MANIFEST_VERSION = 1  # 1: artifact, version, jars {name: sha256}


def copy_dependencies(pom: Path, libs: Path, timeout_s: float, what: str, error: type[Exception]) -> None:
    """Copy the runtime closure of `pom`'s dependencies into `libs`. Failures raise `error` naming `what`."""
    cmd = [
        "mvn",
        "-B",
        "-q",
        "-f",
        str(pom),
        f"{DEPENDENCY_PLUGIN}:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={libs}",
    ]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=timeout_s)
    except FileNotFoundError as exc:
        raise error(f"Maven (`mvn`) is needed to fetch {what} and is not on PATH") from exc
    except subprocess.TimeoutExpired as exc:
        raise error(f"mvn did not resolve {what} within {timeout_s:g}s") from exc
    if done.returncode != 0:
        raise error(f"could not fetch {what} from Maven Central: {mvn_reason(done.stdout + done.stderr)}")


def mvn_reason(output: str) -> str:
    """The line of Maven's output that says what went wrong (a missing artifact, usually), without colours."""
    plain = re.sub(r"\x1b\[[0-9;]*m", "", output)
    missing = re.search(r"Could not find artifact (\S+)", plain)
    if missing:
        return f"artifact {missing.group(1)} is not on Maven Central"
    errors = [line for line in plain.splitlines() if line.startswith("[ERROR]") and line.strip() != "[ERROR]"]
    return (errors[0] if errors else plain.strip()[-500:]) or "mvn failed without output"


def verified_libs(artifact: str, version: str, home: Path, error: type[Exception], timeout_s: float = 900.0) -> Path:
    """`home/libs`: the runtime jars of `group:artifact:version`, fetched into place on first use (resolved beside
    `home`, then renamed, so a half-fetched folder is never used) with a manifest of their sha256 digests, which
    every use checks: a truncated or changed jar is named, not found mid-benchmark."""
    manifest = _manifest(home)
    if manifest is None or (manifest.get("artifact"), manifest.get("version")) != (artifact, version):
        _fetch(artifact, version, home, error, timeout_s)  # none yet, or an older layout's: fetched (again)
        manifest = json.loads((home / "manifest.json").read_text())
    for name, digest in manifest["jars"].items():
        jar = home / "libs" / name
        if not jar.exists() or sha256_of(jar) != digest:
            raise error(f"{artifact} {version}: {jar} is missing or changed; delete {home} to fetch it again")
    return home / "libs"


def _manifest(home: Path) -> dict[str, Any] | None:
    try:
        return json.loads((home / "manifest.json").read_text())
    except (OSError, ValueError):
        return None


def _fetch(artifact: str, version: str, home: Path, error: type[Exception], timeout_s: float) -> None:
    group, name = artifact.split(":")
    home.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=home.parent, prefix=f".{version}.") as tmp:
        build = Path(tmp)
        (build / "pom.xml").write_text(
            '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
            "<groupId>sixnines</groupId><artifactId>fetched-runtime</artifactId><version>1</version><dependencies>"
            f"<dependency><groupId>{group}</groupId><artifactId>{name}</artifactId><version>{version}</version>"
            "</dependency></dependencies></project>\n"
        )
        copy_dependencies(build / "pom.xml", build / "libs", timeout_s, f"{artifact} {version}", error)
        jars = {p.name: sha256_of(p) for p in sorted((build / "libs").glob("*.jar"))}
        manifest = {"manifest_version": MANIFEST_VERSION, "artifact": artifact, "version": version, "jars": jars}
        (build / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
        (build / "pom.xml").unlink()
        if home.exists():
            shutil.rmtree(home)
        build.rename(home)
        home.chmod(0o755)


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
