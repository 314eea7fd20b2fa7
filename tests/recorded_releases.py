"""Release lists as a registry once answered them, cached for a test in its own cache folder: the tests of what a
cell may name depend on these inputs, never on what a registry serves today."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest

from bench_tasks.releases import Release, ReleaseList, refresh


def recorded(
    monkeypatch: pytest.MonkeyPatch, cache: Path, system: str, releases: Iterable[Release | str]
) -> ReleaseList:
    """`system`'s release list cached in `cache` (which becomes the harness's cache), as if just refreshed; a
    plain version stands for a release that can be assembled."""
    monkeypatch.setenv("SIXNINES_CACHE", str(cache))
    listed = [r if isinstance(r, Release) else Release(r, "recorded") for r in releases]
    return refresh(system, lambda: listed)
