"""Files that hold a secret are owner-only from their first byte, whatever the umask: the mode is never loosened
and then tightened (a window in which another user of the host could open the file and keep it open)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench_tasks.secrecy import private_dir
from bench_tasks.systems.rabbitmq.nodefiles import write_cookie


@pytest.fixture
def modes_before_chmod(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Under an open umask, the mode every file had just before the harness changed it."""
    seen: list[int] = []
    real_chmod = os.chmod

    def watching(path: object, mode: int, *args: object, **kwargs: object) -> None:
        if os.path.isfile(path):  # type: ignore[arg-type]
            seen.append(stat.S_IMODE(os.stat(path).st_mode))  # type: ignore[arg-type]
        real_chmod(path, mode, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "chmod", watching)
    old = os.umask(0)
    try:
        yield seen
    finally:
        os.umask(old)


def test_the_erlang_cookie_is_never_readable_by_others(tmp_path: Path, modes_before_chmod: list[int]) -> None:
    home = tmp_path / "erlang"
    write_cookie(home, "c00kie")
    write_cookie(home, "again")  # a restarted cluster replaces it the same way
    cookie = home / ".erlang.cookie"
    assert stat.S_IMODE(cookie.stat().st_mode) == 0o400 and cookie.read_text() == "again"
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert modes_before_chmod and all(not mode & 0o077 for mode in modes_before_chmod), modes_before_chmod


def test_a_private_folder_is_private_under_any_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        folder = private_dir(tmp_path / "crash")
    finally:
        os.umask(old)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
