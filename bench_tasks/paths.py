"""Where the harness keeps fetched binaries and broker state: an ignored `.cache/` folder, reused across runs.

`SIXNINES_CACHE` overrides it (CI and multi-user hosts); the default is `.cache/` in the working directory
so a clone keeps its downloads to itself.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    path = Path(os.environ.get("SIXNINES_CACHE", ".cache")).resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path
