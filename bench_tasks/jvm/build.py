"""Build the JVM worker (`bench_tasks/jvm/worker/`) into the cache, once per content of its sources.

The jar lives in `<cache>/jvm/worker-<digest>/sixnines-worker.jar`, where the digest is the sha256 of every file
under `worker/` here (pom.xml, src/): a changed source builds a new jar beside the old one, an unchanged one is
found at once. Maven compiles it against Maven Central's jars (`provided`: each cell runs it with its system's own
release jars). Nothing is built inside the source folder and no jar is in git.

    python -m bench_tasks.jvm.build      # prints the jar, the build time, and checks the worker's clock

`make` runs it at set-up (target `jvm-worker`). The clock check asks the JVM for System.nanoTime() between two
readings of CLOCK_MONOTONIC here: HotSpot's os::javaTimeNanos reads clock_gettime(CLOCK_MONOTONIC) on Linux, and
this proves it on the machine at hand rather than trusting it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..errors import SixninesError
from ..paths import cache_dir

SOURCE = Path(__file__).resolve().parent / "worker"  # shipped in the wheel beside this module
JAR_NAME = "sixnines-worker.jar"
MAIN_CLASS = "sixnines.worker.Main"
BUILD_TIMEOUT_S = 900.0
_DIGEST_CHARS = 16


class JvmBuildError(SixninesError):
    """The JVM worker could not be built or run here."""


def source_digest(source: Path = SOURCE) -> str:
    """sha256 over every file of the worker's source folder (relative path and bytes), build output excluded."""
    h = hashlib.sha256()
    for path in sorted(p for p in source.rglob("*") if p.is_file() and "target" not in p.relative_to(source).parts):
        h.update(str(path.relative_to(source)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:_DIGEST_CHARS]


def java() -> str:
    """The `java` this host runs workers with ($JAVA_HOME's, else the one on PATH)."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not found or not Path(found).exists():
        raise JvmBuildError("java is not installed: run `make tools` (apt-get install default-jre-headless)")
    return found


def worker_jar(source: Path = SOURCE) -> Path:
    """The worker's jar for the current sources, built now if it is not in the cache yet."""
    return program_jar(source, JAR_NAME)


def program_jar(source: Path, jar_name: str) -> Path:
    """The jar `jar_name` (its pom's finalName) that the Maven project in `source` builds, from the cache when its
    sources are unchanged: `<cache>/jvm/<folder name>-<digest>/`. The worker is one such project; a bench's Java
    program (jvm/jlbh) is another, built the same way."""
    home = cache_dir() / "jvm" / f"{source.name}-{source_digest(source)}"
    jar = home / jar_name
    if jar.exists():
        return jar
    home.mkdir(parents=True, exist_ok=True)
    with _locked(home / ".lock"):
        if not jar.exists():  # another process built it while this one waited
            _build(source, jar)
    return jar


@contextlib.contextmanager
def _locked(path: Path):
    with path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _build(source: Path, jar: Path) -> None:
    if shutil.which("mvn") is None:
        raise JvmBuildError("Maven (`mvn`) is needed to build the JVM worker: run `make tools`")
    with tempfile.TemporaryDirectory(dir=jar.parent) as out:
        cmd = ["mvn", "-B", "-q", "-f", str(source / "pom.xml"), f"-Dsixnines.build={out}", "package"]
        try:
            done = subprocess.run(
                cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=BUILD_TIMEOUT_S
            )
        except subprocess.TimeoutExpired as exc:
            raise JvmBuildError(f"mvn did not build {source} within {BUILD_TIMEOUT_S:g} s") from exc
        built = Path(out) / jar.name
        if done.returncode != 0 or not built.exists():
            errors = [line for line in (done.stdout + done.stderr).splitlines() if "ERROR" in line]
            raise JvmBuildError(f"mvn could not build {source}: {' | '.join(errors[:5]) or done.stderr[-500:]}")
        os.replace(built, jar)


def check_clock(jar: Path) -> int:
    """Run the worker's clock probe: its System.nanoTime() must fall between two CLOCK_MONOTONIC readings here.
    Returns the JVM's reading; JvmBuildError when it does not."""
    before = time.monotonic_ns()
    done = subprocess.run(
        [java(), "-cp", str(jar), MAIN_CLASS, "--clock"], capture_output=True, text=True, timeout=60, check=False
    )
    after = time.monotonic_ns()
    try:
        reading = int(done.stdout.strip())
    except ValueError:
        raise JvmBuildError(f"the worker's clock probe printed {done.stdout[:200]!r} {done.stderr[:200]!r}") from None
    if not before <= reading <= after:
        raise JvmBuildError(
            f"System.nanoTime() read {reading}, outside CLOCK_MONOTONIC [{before}, {after}]: this JVM's clock is not "
            "the harness's, so its stamps cannot be compared with any other worker's"
        )
    return reading


def main() -> int:
    started = time.monotonic()
    fresh = not (cache_dir() / "jvm" / f"worker-{source_digest()}" / JAR_NAME).exists()
    try:
        jar = worker_jar()
        check_clock(jar)
    except SixninesError as exc:
        print(f"jvm worker: {exc}", file=sys.stderr)
        return 1
    took = time.monotonic() - started
    print(f"{jar} ({'built' if fresh else 'cached'} in {took:.1f} s; System.nanoTime reads CLOCK_MONOTONIC)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
