"""Fetching jars from Maven Central with `mvn dependency:copy-dependencies` on a generated pom (Kafka releases,
Kafka's tools, hadoop-aws for s3a): one runner, so every fetch fails the same readable way."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"


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
