"""The lock is what gets installed: every locked package that applies to this interpreter is installed at the
locked version, and the lock covers every dependency pyproject.toml declares (a fresh clone resolves nothing)."""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]


def locked() -> dict[str, str]:
    """name → version of every lock line whose environment marker holds here."""
    pins = {}
    for line in (REPO / "constraints-3.11.txt").read_text().splitlines():
        if not line or line.startswith(("#", " ")):
            continue
        req = Requirement(line)
        if req.marker is None or req.marker.evaluate():
            (spec,) = req.specifier
            assert spec.operator == "==", f"{line!r}: the lock pins exact versions"
            pins[canonicalize_name(req.name)] = spec.version
    return pins


def test_installed_versions_are_the_locked_ones() -> None:
    wrong = {}
    for name, version in locked().items():
        installed = metadata.version(name)
        if installed != version:
            wrong[name] = f"installed {installed}, locked {version}"
    assert not wrong, f"the venv differs from constraints-3.11.txt (run `make venv`): {wrong}"


def test_lock_covers_every_declared_dependency() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = [*project["dependencies"], *(r for extra in project["optional-dependencies"].values() for r in extra)]
    pins = locked()
    for text in declared:
        req = Requirement(text)
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is declared in pyproject.toml but not locked: run `make lock`"
        assert req.specifier.contains(pins[name]), f"{req.name}: locked {pins[name]} is outside {req.specifier}"
