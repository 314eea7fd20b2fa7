"""Class-data archives for the JVMs the harness starts (Kafka nodes and their tools, Spark drivers).

A JVM spends its first seconds loading, parsing and verifying the same few thousand classes at every start. The
JDK can dump the classes a run loaded into an archive (`-XX:ArchiveClassesAtExit`, a dynamic CDS archive) and
map it at later starts (`-XX:SharedArchiveFile`): here a Spark session with its first query came up in 4.6 s
instead of 9.0 s, the analysis task of `make bench` took 20–22 s instead of 25–26 s, one Kafka node was ready in
2.0 s instead of 3.2 s and three (their storage tool runs included) in 5.9 s instead of 9.0 s.

Only start-up changes: the classes are the same bytecode, and the JIT compiles them as before. The JVM checks an
archive against itself (its exact build) and the classpath, and with `-Xshare:auto` (the default) silently runs
without one that does not match or does not exist, so a stale archive costs speed, never a result. An archive
is named after what it depends on (`java_digest`, the classpath's own key) so that a new JDK or a new set of
jars gets a new one, made once by whoever owns that classpath (spark_jobs.classdata, the Kafka release).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path


def find_java() -> str | None:
    """The `java` a launcher runs, as Kafka's and Spark's scripts find it: `$JAVA_HOME/bin/java`, else the first
    on PATH; None if there is neither."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    return shutil.which("java")


def java_digest(java: str) -> str:
    """A short key of the `java` binary that would run: its real path and its file's identity (an upgraded JDK
    is a new file). An archive made by another JVM build would be ignored by the JVM anyway; this key makes a
    new one instead."""
    real = os.path.realpath(java)
    stat = os.stat(real)
    return hashlib.sha256(f"{real}\0{stat.st_size}\0{stat.st_mtime_ns}".encode()).hexdigest()[:12]


def use_flags(archive: Path) -> tuple[str, ...]:
    """The flag that maps `archive` at start-up, or none while it has not been made."""
    return (f"-XX:SharedArchiveFile={archive}",) if archive.is_file() else ()


def dump(archive: Path, run: Callable[[tuple[str, ...]], None]) -> bool:
    """Make `archive`: `run(flags)` must start a JVM with `flags`, give it representative work and wait until
    the JVM has exited (it writes the archive as it exits). Written beside its final name and renamed into
    place, so a JVM starting meanwhile never maps half a file; True if the archive now exists."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_name(f".{archive.name}.{os.getpid()}.partial")
    try:
        run((f"-XX:ArchiveClassesAtExit={partial}",))
        if partial.is_file() and partial.stat().st_size > 0:
            os.replace(partial, archive)
    finally:
        partial.unlink(missing_ok=True)
    return archive.is_file()
