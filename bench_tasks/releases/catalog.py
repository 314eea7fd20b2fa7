"""A system's releases as its registry serves them, cached so that matrices validate without the network.

Each system's package lists what its registry serves (`System.list_releases`: Maven Central, PyPI wheels, the Go
module proxy, Debian) and says of each release whether it can be assembled here, and if not, what is missing.
The list is cached per system (`<cache>/releases/<system>.json`, newest first): matrix validation reads the cache
only, `sixnines brokers fetch SYSTEM --list` refreshes it, and a run refreshes it when it starts (`for_run`), so
`latest` is the newest release that can be assembled *today*. When the registry cannot be reached the cache is
used, and what resolves against it says so (`ReleaseList.offline`).

A matrix names a release exactly (`4.3.2`), by line (`4.3.x`, `4.x`) or as `latest`; a line and `latest` choose
among stable releases that can be assembled, and are resolved when the run starts (`resolve`). A range
(`VersionRange`: from, to, every minor or every patch) expands to exact versions in release order at parse time.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import BrokerError
from ..paths import cache_dir
from .order import LATEST, is_pattern, matches, minor_of, stable, version_key

_log = logging.getLogger(__name__)
# 1: system, source, fetched_at, releases [{version, source, missing}] newest first
SCHEMA_VERSION = 1
RUN_MAX_AGE_S = 3600.0  # a run starting within an hour of the last refresh uses that list


@dataclass(frozen=True)
class Release:
    """One release a registry serves. `missing`: why it cannot be assembled here (None: it can)."""

    version: str
    source: str
    missing: str | None = None

    @property
    def assemblable(self) -> bool:
        return self.missing is None


@dataclass
class ReleaseList:
    """A system's cached release list; `offline` says why it could not be refreshed when that was asked for."""

    system: str
    releases: list[Release]
    fetched_at: str | None = None
    offline: str | None = None
    _by_version: dict[str, Release] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.releases = sorted(self.releases, key=lambda r: version_key(r.version), reverse=True)
        self._by_version = {r.version: r for r in self.releases}

    def get(self, version: str) -> Release | None:
        return self._by_version.get(version)

    def candidates(self) -> list[str]:
        """What `latest`, a line or a range may choose: stable releases that can be assembled, newest first."""
        return [r.version for r in self.releases if r.assemblable and stable(r.version)]

    def problem(self, wanted: str) -> str | None:
        """Why `wanted` (a version, a line or `latest`) names nothing this list can run; None when it can."""
        if is_pattern(wanted):
            if not any(matches(wanted, v) for v in self.candidates()):
                return f"no release of {self.system} {wanted} can be assembled{self._listed()}"
            return None
        release = self.get(wanted)
        if release is None:
            return f"unknown {self.system} version {wanted!r}{self._listed()}"
        if release.missing is not None:
            return f"{self.system} {wanted} cannot be assembled: {release.missing}"
        return None

    def resolve(self, wanted: str) -> str:
        """The exact release `wanted` names (the newest of its line, or of all for `latest`); BrokerError why not."""
        problem = self.problem(wanted)
        if problem is not None:
            raise BrokerError(problem)
        if not is_pattern(wanted):
            return wanted
        return next(v for v in self.candidates() if matches(wanted, v))

    def expand(self, start: str, end: str = LATEST, every: str = "minor") -> list[str]:
        """The releases from `start` to `end` (each a version or a line: `3.6` is 3.6.0 onwards, up to the newest
        of `end`'s line), in release order: the newest patch of every minor, or every patch."""
        high = version_key(self.resolve(end if end == LATEST or self.get(end) else _line(end)))
        chosen = [v for v in reversed(self.candidates()) if minor_of(v) >= minor_of(start) and version_key(v) <= high]
        if self.get(start) is not None:  # an exact first release: none before it, even of its minor
            chosen = [v for v in chosen if version_key(v) >= version_key(start)]
        if every == "minor":
            newest = {minor_of(v): v for v in chosen}  # oldest first: each minor keeps its last (newest) patch
            chosen = [v for v in chosen if newest[minor_of(v)] == v]
        if not chosen:
            raise BrokerError(f"no release of {self.system} from {start} to {end} can be assembled{self._listed()}")
        return chosen

    def _listed(self) -> str:
        """Where to see the releases: the list this one is (its date) and the command that shows and refreshes it."""
        when = f" of {self.fetched_at[:10]}" if self.fetched_at else ""
        return f"; not in the release list{when} ('sixnines brokers fetch {self.system} --list' shows it)"

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "system": self.system,
            "fetched_at": self.fetched_at,
            "releases": [asdict(r) for r in self.releases],
        }


def cache_path(system: str) -> Path:
    return cache_dir() / "releases" / f"{system}.json"


def cached(system: str) -> ReleaseList | None:
    """The cached list, or None when it was never fetched (or was written by a reader this one does not know)."""
    try:
        raw = json.loads(cache_path(system).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    if raw.get("schema_version") != SCHEMA_VERSION:
        return None
    return ReleaseList(system, [Release(**r) for r in raw["releases"]], raw.get("fetched_at"))


def refresh(system: str, lister: Callable[[], Sequence[Release]]) -> ReleaseList:
    """Ask the registry (`lister`), cache the answer and return it; BrokerError when it cannot be reached."""
    releases = list(lister())
    if not releases:
        raise BrokerError(f"the registry of {system} lists no release")
    fresh = ReleaseList(system, releases, dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))
    _write_atomically(cache_path(system), json.dumps(fresh.to_dict(), indent=1))
    return fresh


def known(system: str, lister: Callable[[], Sequence[Release]], fresh: bool = False) -> ReleaseList:
    """The cached list; the registry (`lister`) is asked when `fresh` or when nothing is cached."""
    found = None if fresh else cached(system)
    return found if found is not None else refresh(system, lister)


def resolve(system: str, lister: Callable[[], Sequence[Release]], version: str) -> str:
    """`latest` or a line (`4.3.x`) → the newest release of it that can be assembled, from the list a run resolves
    against (`current`); an exact version is returned unchanged (fetching it says what is missing, if anything)."""
    return current(system, lister).resolve(version) if is_pattern(version) else version


def current(system: str, lister: Callable[[], Sequence[Release]], max_age_s: float = RUN_MAX_AGE_S) -> ReleaseList:
    """The list a run resolves against: the cache when it is younger than `max_age_s`, else a fresh one; when the
    registry cannot be reached, the cache as it is, marked `offline` with the reason (a run says so)."""
    known = cached(system)
    if known is not None and _age_s(known) < max_age_s:
        return known
    try:
        return refresh(system, lister)
    except (BrokerError, OSError) as exc:
        if known is None:
            raise BrokerError(f"cannot list the releases of {system}, and none are cached: {exc}") from exc
        _log.warning("the registry of %s cannot be reached (%s); using the list of %s", system, exc, known.fetched_at)
        known.offline = f"the registry could not be reached ({exc}); the list of {known.fetched_at} was used"
        return known


def _age_s(known: ReleaseList) -> float:
    if known.fetched_at is None:
        return float("inf")
    return (dt.datetime.now(dt.UTC) - dt.datetime.fromisoformat(known.fetched_at)).total_seconds()


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _line(prefix: str) -> str:
    """`4.1` → `4.1.x` (a range's end names a whole line); a line stays as it is."""
    return prefix if prefix.endswith(".x") else f"{prefix}.x"
