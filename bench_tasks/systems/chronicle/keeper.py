"""The keeper of a cell's queue folders: Chronicle Queue has no server, so this small process stands for the
cell's "broker" in the broker-control protocol. It holds the folder for the cell's life and removes it when it is
stopped (SIGTERM, or its parent's death when tied to it), so a tmpfs queue never outlives its cell, whichever
process (the CLI, Airflow's teardown task) stops it by PID.

    python -m bench_tasks.systems.chronicle.keeper FOLDER
"""

from __future__ import annotations

import shutil
import signal
import sys
import threading
from pathlib import Path

PROCESS_NAME = "bench_tasks.systems.chronicle.keeper"


def main(folder: Path) -> int:
    stopped = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stopped.set())
    print(f"keeping {folder}", flush=True)
    while not stopped.wait(3600):
        pass
    shutil.rmtree(folder, ignore_errors=True)
    print(f"removed {folder}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
