"""`python -m bench_tasks.releases`: refresh every system's cached release list (what `make` runs at set-up, so a
fresh clone validates matrices that name releases by line or range). A registry that cannot be reached keeps the
list already cached, with a note; with none cached the command fails, naming the system."""

from __future__ import annotations

import sys

from ..errors import BrokerError
from ..systems import SYSTEMS
from .catalog import ReleaseList, cached, refresh
from .order import LATEST


def main() -> int:
    failed = []
    for name, chosen in sorted(SYSTEMS.items()):
        try:
            listed = refresh(name, chosen.list_releases)
        except (BrokerError, OSError) as exc:
            if cached(name) is None:
                failed.append(name)
            print(f"{name}: the registry could not be reached ({exc}); the cached list stays", file=sys.stderr)
            continue
        print(f"{name}: {len(listed.releases)} releases listed, {_latest(listed)}")
    return 1 if failed else 0


def _latest(listed: ReleaseList) -> str:
    """What `latest` runs, or why nothing can yet: listing needs no installed system (RabbitMQ's Debian release is
    listed on a machine where apt has not installed it yet), running does."""
    problem = listed.problem(LATEST)
    return f"latest: none yet ({problem})" if problem else f"latest {listed.resolve(LATEST)}"


if __name__ == "__main__":
    sys.exit(main())
