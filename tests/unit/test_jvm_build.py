"""The JVM builder's cache: a Maven project's jar is kept under its folder's name and the digest of its sources, so
an unchanged project is found without Maven and a changed one is built beside the old jar (the worker, jvm/jlbh)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench_tasks.jvm import build


def test_a_project_s_jar_is_found_by_folder_name_and_source_digest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SIXNINES_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(build, "_build", lambda source, jar: pytest.fail(f"built {jar} though it was cached"))
    source = tmp_path / "jlbh"
    (source / "src").mkdir(parents=True)
    (source / "pom.xml").write_text("<project/>")
    cached = tmp_path / "cache" / "jvm" / f"jlbh-{build.source_digest(source)}" / "sixnines-jlbh.jar"
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"jar")

    assert build.program_jar(source, "sixnines-jlbh.jar") == cached
    (source / "src" / "Main.java").write_text("class Main {}")
    built: list[Path] = []
    monkeypatch.setattr(build, "_build", lambda source, jar: built.append(jar))
    build.program_jar(source, "sixnines-jlbh.jar")
    assert built and built[0].parent.name == f"jlbh-{build.source_digest(source)}" and built[0] != cached
