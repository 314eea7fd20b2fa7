"""Make the class-data archive of a Kafka release's classpath (bench_tasks.classdata), once per release and JVM:
`make` runs `python -m bench_tasks.systems.kafka.classdata`, for the newest release that can be assembled unless
told which.

The training run is a real single-node cluster started and stopped with the nodes' own flags: the node writes
the archive as its JVM exits after a clean shutdown. Every later node and storage-tool run of that release maps
it (KafkaCluster.start, recorded as the endpoint's `class_data`).

    python -m bench_tasks.systems.kafka.classdata [VERSION ...]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from ...classdata import dump
from ...errors import BrokerError
from .cluster import KafkaCluster
from .jvm import default_jvm_opts, java_binary
from .release import class_archive, newest_release, release_of

STOP_GRACE_S = 60.0  # a clean shutdown, then the archive written: never the SIGKILL that would lose it


def make_archive(version: str) -> Path | None:
    """The archive of `version` (fetched first if need be), made now if it is missing; None if it could not be."""
    archive = class_archive(release_of(version), java_binary())
    if archive.is_file():
        return archive
    print(f"making Kafka {version}'s class-data archive (once, ~7 s)", flush=True)

    def run(flags: tuple[str, ...]) -> None:
        with tempfile.TemporaryDirectory(prefix="sixnines-kafka-classdata-") as folder:
            cluster = KafkaCluster(version, 1, {}, Path(folder), jvm_opts=(*default_jvm_opts(), *flags))
            cluster.start()
            cluster.stop(grace_s=STOP_GRACE_S)

    return archive if dump(archive, run) else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("versions", nargs="*", help="Kafka releases (default: the newest that can be assembled)")
    for version in parser.parse_args(argv).versions or [newest_release()]:
        try:
            made = make_archive(version)
        except (BrokerError, OSError) as exc:  # a speed-up only: the set-up goes on, and so do the nodes
            print(f"Kafka {version}: {exc}", file=sys.stderr)
            made = None
        if made is None:
            print(f"no class-data archive for Kafka {version}: its nodes start without one", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
