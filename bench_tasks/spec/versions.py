"""What a matrix's `versions:` may hold: exact releases, lines (`4.3.x`), `latest`, and ranges of releases.

    versions: ["3.9.2", "4.3.x", latest]
    versions: {from: "3.6", to: latest, every: minor}   # the newest patch of every minor from 3.6, in release order
    versions: [{from: "2.9", every: minor}, "2.8.4"]

A range expands when the matrix is parsed, against the system's cached release list (no network: `sixnines
brokers fetch SYSTEM --list` refreshes it, and so does every run when it starts), so `sixnines cells` shows every
release it chose. Lines and `latest` stay as written until a run starts and resolves them to what can be
assembled then.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from ..errors import BrokerError
from ..releases import LATEST, cached
from .base import StrictModel


class VersionRange(StrictModel):
    """Releases from `from` to `to` (each a release or a line: `3.6` is every 3.6.x), every minor's newest patch
    or every patch, in release order."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    start: str = Field(alias="from", description="the first release or line (3.6: from 3.6.0)")
    to: str = Field(LATEST, description="the last release or line (4.1: up to the newest 4.1.x), or latest")
    every: Literal["minor", "patch"] = Field("minor", description="minor: the newest patch of each minor")


VersionEntry = str | VersionRange


def expanded(system: str, entries: list[VersionEntry], where: str) -> tuple[list[str], list[str]]:
    """(versions, problems): every range of `entries` replaced by the releases it names, duplicates removed."""
    versions: list[str] = []
    problems: list[str] = []
    for index, entry in enumerate(entries):
        if isinstance(entry, str):
            versions.append(entry)
            continue
        known = cached(system)
        if known is None:
            problems.append(
                f"{where}.versions[{index}]: a range needs the list of {system} releases; run "
                f"'sixnines brokers fetch {system} --list' once"
            )
            continue
        try:
            versions += known.expand(entry.start, entry.to, entry.every)
        except BrokerError as exc:
            problems.append(f"{where}.versions[{index}]: {exc}")
    return list(dict.fromkeys(versions)), problems
