"""The detached generator process Airflow's warmup task starts: `python -m bench_tasks.cell.generator ROOT`.

Its own entry rather than the CLI's: the workers' fork server is asked for before anything else is imported (the
CLI alone takes seconds of a small host's CPU), so its imports run beside this process's own.
"""

from __future__ import annotations

import sys
from pathlib import Path

from .workerctx import prestart


def main(argv: list[str]) -> int:
    """Drive the cell provisioned in the work folder `argv[0]`; 0 if its schedule completed, 1 if it failed."""
    prestart()
    from .process import generator_main

    return generator_main(Path(argv[0]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
