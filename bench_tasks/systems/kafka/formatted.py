"""A KRaft node's formatted storage: made by the release's storage tool once, copied for every later cluster.

Why: before any node of a KRaft cluster starts, the storage tool formats each node's log dir, one JVM per node, on
every cluster start. For a plaintext cluster what it writes depends on the release and the nodes' settings, not on
the cluster: `meta.properties` (the cluster's id, the node's id, a random id for the directory) and
the metadata version and feature levels the release starts at (`bootstrap.checkpoint` in 3.6, the metadata
log's first checkpoint in 4.4: the same records, two clusters' copies differing only in timestamps and CRCs).
So the first cluster of a release and settings formats with the tool and keeps what it wrote beside the release; a
later one copies that and writes its own cluster id and fresh directory ids into `meta.properties`, which is what
the tool would have done.

What always formats with the tool: a secured cluster (SCRAM users go into the checkpoint with their passwords, and
TLS or SASL settings carry per-cluster secrets), and a release whose tool wrote any other file, or named the
cluster or a directory anywhere but `meta.properties` (a dynamic quorum's voter set, say): that is not kept, so
a copy never stands in for something this module does not understand.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from .tools import NodePlan, new_cluster_id

META = "meta.properties"
FIRST_CHECKPOINT = "__cluster_metadata-0/00000000000000000000-0000000000.checkpoint"
KNOWN_FILES = frozenset({META, "bootstrap.checkpoint", FIRST_CHECKPOINT})  # what 3.6 and 4.4 write for plaintext


def template_dir(release_home: Path, settings: Mapping[int, str]) -> Path:
    """Where the formatted storage of a cluster whose nodes have these (placeholder-port) settings is kept: beside
    the release, so that a re-fetch, a new folder, drops it with the jars that wrote it."""
    digest = hashlib.sha256(repr(sorted(settings.items())).encode()).hexdigest()[:20]
    return release_home / "formatted" / digest


def copy_formatted(template: Path, plans: Sequence[NodePlan], cluster_id: str) -> bool:
    """Each node's log dir from `template`, as the tool would format it for `cluster_id`; False (nothing copied)
    when there is no complete template for these nodes."""
    if not all((template / f"node-{p.node_id}" / META).is_file() for p in plans):
        return False
    for plan in plans:
        shutil.copytree(template / f"node-{plan.node_id}", plan.log_dir, dirs_exist_ok=True)
        meta = plan.log_dir / META
        meta.write_text(_with_ids(meta.read_text(), cluster_id))
    return True


def keep_formatted(template: Path, plans: Sequence[NodePlan], cluster_id: str) -> None:
    """Keep what the tool just wrote for `cluster_id` into each node's log dir as `template`, if it is only what
    this module knows how to copy; two clusters formatting at once both try, and the first to finish keeps its."""
    if template.exists() or not all(_copyable(p.log_dir, cluster_id) for p in plans):
        return
    template.parent.mkdir(parents=True, exist_ok=True)
    build = Path(tempfile.mkdtemp(prefix=".formatting-", dir=template.parent))
    try:
        for plan in plans:
            shutil.copytree(plan.log_dir, build / f"node-{plan.node_id}")
        os.rename(build, template)
    except OSError:  # another cluster kept its copy first
        pass
    finally:
        shutil.rmtree(build, ignore_errors=True)


def _copyable(log_dir: Path, cluster_id: str) -> bool:
    """Only known files, and none but `meta.properties` naming the cluster or the directory (as text or as the 16
    bytes of their Uuid), so that writing new ids into `meta.properties` makes the copy whole."""
    files = {f.relative_to(log_dir).as_posix(): f for f in log_dir.rglob("*") if f.is_file()}
    if META not in files or not set(files) <= KNOWN_FILES:
        return False
    ids = [
        cluster_id,
        *(line.split("=", 1)[1] for line in files[META].read_text().splitlines() if line.startswith("directory.id=")),
    ]
    marks = [form for text in ids for form in (text.encode(), _uuid_bytes(text))]
    return not any(mark in f.read_bytes() for name, f in files.items() if name != META for mark in marks)


def _uuid_bytes(text: str) -> bytes:
    """The 16 bytes a Kafka Uuid's text stands for; b"" (found in any file, so nothing is kept) if it is none."""
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except ValueError:
        return b""
    return raw if len(raw) == 16 else b""


def _with_ids(meta: str, cluster_id: str) -> str:
    """`meta.properties` with this cluster's id and a fresh directory id (each log dir has its own, from 3.7)."""
    lines = []
    for line in meta.splitlines():
        if line.startswith("cluster.id="):
            line = f"cluster.id={cluster_id}"
        elif line.startswith("directory.id="):
            line = f"directory.id={new_cluster_id()}"
        lines.append(line)
    return "\n".join(lines) + "\n"
