"""Whether a release a matrix names predates a feature a cell needs (JetStream, streams), from the version alone:
matrices are validated without the network, and a cell refused at parse time never starts a server to find out.
"""

from __future__ import annotations

from ..releases import is_version, version_key


def predates(version: str, first: str) -> bool:
    """Whether every release `version` names comes before `first` (the feature's first release): an exact release,
    or a line (`2.1.x`) all of whose releases do. `latest`, and a line that reaches `first`, do not."""
    if version.endswith(".x"):
        parts = version[:-2].split(".")
        if not all(p.isdigit() for p in parts):
            return False
        prefix = tuple(int(p) for p in parts)
        return prefix < version_key(first).release[: len(prefix)]
    return is_version(version) and version_key(version) < version_key(first)
