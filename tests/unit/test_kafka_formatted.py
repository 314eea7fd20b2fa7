"""A KRaft node's formatted storage, copied from the storage tool's earlier work: the cluster's id and fresh
directory ids written in, every other byte as the tool wrote it; anything the module does not know is never kept."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from bench_tasks.systems.kafka.formatted import FIRST_CHECKPOINT, copy_formatted, keep_formatted, template_dir
from bench_tasks.systems.kafka.tools import NodePlan

META = (
    "#\n#Mon Dec 07 17:00:00 UTC 2026\ncluster.id=OLDclusterIdAAAAAAAAAA\ndirectory.id=OLDdirIdAAAAAAAAAAAAAA\n"
    "node.id={}\nversion=1\n"
)
OLD_CLUSTER = "OLDclusterIdAAAAAAAAAA"


def formatted_by_the_tool(root: Path, nodes: int = 2) -> list[NodePlan]:
    plans = [NodePlan(i, 9000 + i, 9100 + i, root / f"node-{i}") for i in range(1, nodes + 1)]
    for plan in plans:
        plan.log_dir.mkdir(parents=True)
        (plan.log_dir / "meta.properties").write_text(META.format(plan.node_id))
        (plan.log_dir / "bootstrap.checkpoint").write_bytes(b"\x00features\xff")
    return plans


def test_a_copy_carries_the_new_cluster_id_and_a_fresh_directory_id_per_node(tmp_path: Path) -> None:
    template = template_dir(tmp_path / "release", {1: "a=1", 2: "a=1"})
    keep_formatted(template, formatted_by_the_tool(tmp_path / "first"), OLD_CLUSTER)
    plans = [NodePlan(i, 1, 2, tmp_path / "second" / f"node-{i}") for i in (1, 2)]

    assert copy_formatted(template, plans, "NEWclusterIdBBBBBBBBBB")

    metas = [
        dict(line.split("=", 1) for line in (p.log_dir / "meta.properties").read_text().splitlines() if "=" in line)
        for p in plans
    ]
    assert [m["cluster.id"] for m in metas] == ["NEWclusterIdBBBBBBBBBB"] * 2
    assert [m["node.id"] for m in metas] == ["1", "2"] and [m["version"] for m in metas] == ["1", "1"]
    directory_ids = {m["directory.id"] for m in metas}
    assert len(directory_ids) == 2 and "OLDdirIdAAAAAAAAAAAAAA" not in directory_ids
    assert all(len(d) == 22 and not d.startswith("-") for d in directory_ids)
    assert all((p.log_dir / "bootstrap.checkpoint").read_bytes() == b"\x00features\xff" for p in plans)


def test_no_template_copies_nothing(tmp_path: Path) -> None:
    plans = [NodePlan(1, 1, 2, tmp_path / "node-1")]
    assert not copy_formatted(template_dir(tmp_path, {1: "a=1"}), plans, "x") and not plans[0].log_dir.exists()


def test_settings_that_differ_have_templates_of_their_own(tmp_path: Path) -> None:
    assert template_dir(tmp_path, {1: "a=1"}) != template_dir(tmp_path, {1: "a=2"})
    assert template_dir(tmp_path, {1: "a=1"}) != template_dir(tmp_path, {1: "a=1", 2: "a=1"})


def test_a_log_dir_holding_anything_else_is_not_kept(tmp_path: Path) -> None:
    plans = formatted_by_the_tool(tmp_path / "first")
    (plans[1].log_dir / "__cluster_metadata-0").mkdir()
    (plans[1].log_dir / "__cluster_metadata-0" / "quorum-state").write_text("{}")  # not what a copy knows
    template = template_dir(tmp_path / "release", {1: "a=1", 2: "a=1"})

    keep_formatted(template, plans, OLD_CLUSTER)

    assert not template.parent.exists()


def test_the_first_kept_template_stays(tmp_path: Path) -> None:
    template = template_dir(tmp_path / "release", {1: "a=1", 2: "a=1"})
    keep_formatted(template, formatted_by_the_tool(tmp_path / "first"), OLD_CLUSTER)
    later = formatted_by_the_tool(tmp_path / "later")
    (later[0].log_dir / "bootstrap.checkpoint").write_bytes(b"other")

    keep_formatted(template, later, OLD_CLUSTER)

    assert (template / "node-1" / "bootstrap.checkpoint").read_bytes() == b"\x00features\xff"
    assert [p.name for p in template.parent.iterdir()] == [template.name]  # no half-built folder left behind


def test_4_4s_first_checkpoint_is_kept_and_copied(tmp_path: Path) -> None:
    plans = formatted_by_the_tool(tmp_path / "first", nodes=1)
    (plans[0].log_dir / "bootstrap.checkpoint").unlink()
    (plans[0].log_dir / FIRST_CHECKPOINT).parent.mkdir()
    (plans[0].log_dir / FIRST_CHECKPOINT).write_bytes(b"features")
    template = template_dir(tmp_path / "release", {1: "a=1"})

    keep_formatted(template, plans, OLD_CLUSTER)
    copied = NodePlan(1, 1, 2, tmp_path / "second" / "node-1")

    assert copy_formatted(template, [copied], "NEWclusterIdBBBBBBBBBB")
    assert (copied.log_dir / FIRST_CHECKPOINT).read_bytes() == b"features"


@pytest.mark.parametrize("named", ["OLDclusterIdAAAAAAAAAA", "OLDdirIdAAAAAAAAAAAAAA"])
def test_a_checkpoint_naming_the_cluster_or_its_directory_is_not_kept(tmp_path: Path, named: str) -> None:
    """A voter set, say, names each voter's directory: a copy with fresh ids would contradict it."""
    plans = formatted_by_the_tool(tmp_path / "first", nodes=1)
    raw = base64.urlsafe_b64decode(named + "==")
    (plans[0].log_dir / "bootstrap.checkpoint").write_bytes(b"voters:" + raw)
    template = template_dir(tmp_path / "release", {1: "a=1"})

    keep_formatted(template, plans, OLD_CLUSTER)

    assert not template.exists()
