"""The turns on the host that parallel test workers take (tests/host_turns.py), on real flocks held by threads
(each opens its own file description, as each worker process does): shared holders overlap, an `alone` holder
waits for them and keeps later shared holders out until it ends."""

from __future__ import annotations

import threading
from pathlib import Path

from tests.host_turns import host_turn

WAIT_S = 5.0


class Holder:
    """A thread that takes a turn, reports when it has it, and keeps it until released."""

    def __init__(self, folder: Path, alone: bool) -> None:
        self.granted = threading.Event()
        self.release = threading.Event()
        self.thread = threading.Thread(target=self._hold, args=(folder, alone), daemon=True)
        self.thread.start()

    def _hold(self, folder: Path, alone: bool) -> None:
        with host_turn(folder, alone):
            self.granted.set()
            self.release.wait(WAIT_S)

    def end(self) -> None:
        self.release.set()
        self.thread.join(WAIT_S)


def test_shared_turns_overlap(tmp_path: Path) -> None:
    first, second = Holder(tmp_path, alone=False), Holder(tmp_path, alone=False)
    assert first.granted.wait(WAIT_S) and second.granted.wait(WAIT_S)
    first.end()
    second.end()


def test_alone_waits_for_shared_and_keeps_later_shared_out(tmp_path: Path) -> None:
    shared = Holder(tmp_path, alone=False)
    assert shared.granted.wait(WAIT_S)
    alone = Holder(tmp_path, alone=True)
    assert not alone.granted.wait(0.3), "alone was granted while a shared turn was held"
    later = Holder(tmp_path, alone=False)
    assert not later.granted.wait(0.3), "a later shared turn passed an alone turn waiting before it"
    shared.end()
    assert alone.granted.wait(WAIT_S)
    assert not later.granted.wait(0.3), "a shared turn was granted while alone held the host"
    alone.end()
    assert later.granted.wait(WAIT_S)
    later.end()
