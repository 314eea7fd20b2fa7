"""The test Celery deployment's broker (kombu's filesystem transport, as tests/celery_diagnostics patches it):
a message file is named for its queue only once it is written whole, so a worker never takes a half-written one."""

from __future__ import annotations

import json
import os
import runpy
from pathlib import Path

import pytest
from kombu import Connection

runpy.run_path(str(Path(__file__).parents[1] / "celery_diagnostics" / "atomic_messages.py"))  # patches kombu


def test_a_message_is_named_for_its_queue_only_when_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "messages"
    folder.mkdir()
    renamed: list[tuple[str, bytes]] = []  # (name given, what the file held then), for files that were partial
    rename = os.rename

    def recording(src: str, dst: str) -> None:
        if src.endswith(".part"):
            renamed.append((Path(dst).name, Path(src).read_bytes()))
        rename(src, dst)

    monkeypatch.setattr(os, "rename", recording)
    options = {"data_folder_in": str(folder), "data_folder_out": str(folder), "control_folder": str(tmp_path)}
    with Connection("filesystem://", transport_options={**options, "polling_interval": 0.01}) as conn:
        queue = conn.SimpleQueue("tasks")
        (folder / "1_x.tasks.msg.part").write_bytes(b"")  # a message still being written: not for the queue yet
        queue.put({"task": 1})
        message = queue.get(timeout=2)
        assert message.payload == {"task": 1}
        message.ack()
        queue.close()
    (held,) = [b for n, b in renamed if n.endswith(".tasks.msg")]
    assert json.loads(held)["body"]  # whole when it got its queue's name
    assert [p.name for p in folder.iterdir()] == ["1_x.tasks.msg.part"]  # left alone by the queue
