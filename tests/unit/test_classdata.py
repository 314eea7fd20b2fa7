"""Class-data archives (bench_tasks.classdata) with the machine's real JVM: one made by `dump` maps (`-Xshare:on`
refuses to start otherwise), a missing one gives no flag, a run that writes none leaves nothing behind, and a
broken one costs only the speed-up (the JVM's default `-Xshare:auto` starts without it)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from bench_tasks.classdata import dump, java_digest, use_flags

JAVA = shutil.which("java")
pytestmark = pytest.mark.skipif(JAVA is None, reason="no java on PATH")


def _java(*args: str) -> subprocess.CompletedProcess[str]:
    assert JAVA is not None
    return subprocess.run([JAVA, *args, "-version"], capture_output=True, text=True, timeout=60, check=False)


def test_a_dumped_archive_is_renamed_into_place_and_maps(tmp_path: Path) -> None:
    archive = tmp_path / "archives" / "java.jsa"
    assert use_flags(archive) == ()
    assert dump(archive, lambda flags: _java(*flags).check_returncode())
    assert sorted(p.name for p in archive.parent.iterdir()) == ["java.jsa"]  # no partial file left
    (flag,) = use_flags(archive)
    assert flag == f"-XX:SharedArchiveFile={archive}"
    mapped = _java("-Xshare:on", flag)
    assert mapped.returncode == 0 and "sharing" in mapped.stderr, mapped.stderr


def test_a_run_that_writes_no_archive_leaves_nothing(tmp_path: Path) -> None:
    archive = tmp_path / "java.jsa"
    assert not dump(archive, lambda flags: None)
    assert list(tmp_path.iterdir()) == []


def test_a_broken_archive_only_costs_the_speed_up(tmp_path: Path) -> None:
    archive = tmp_path / "java.jsa"
    archive.write_text("not an archive")
    started = _java(*use_flags(archive))
    assert started.returncode == 0, started.stderr
    assert _java("-Xshare:on", *use_flags(archive)).returncode != 0  # it really was not mapped


def test_the_java_key_follows_the_binary(tmp_path: Path) -> None:
    assert JAVA is not None
    copy = tmp_path / "java"
    shutil.copy2(JAVA, copy)
    assert java_digest(JAVA) == java_digest(JAVA) != java_digest(str(copy))
