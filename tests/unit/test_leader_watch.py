"""LeaderWatch over an injected poll function (the cluster's answer at each poll): every change recorded once,
an election (no leader known) and a failed poll recorded as nothing."""

from __future__ import annotations

import time
from collections.abc import Iterator

from bench_tasks.brokers.leaders import LeaderWatch
from bench_tasks.errors import BrokerError


def test_each_change_is_recorded_once_and_elections_and_errors_are_skipped() -> None:
    answers: Iterator[dict[int, int] | Exception] = iter(
        [{0: 1, 1: 2}, {0: 1, 1: 2}, {}, BrokerError("no metadata"), {0: 3, 1: 2}]
    )
    polls = []

    def poll() -> dict[int, int]:
        answer = next(answers, {0: 3, 1: 2})
        polls.append(answer)
        if isinstance(answer, Exception):
            raise answer
        return answer

    watch = LeaderWatch(poll)
    watch.start()
    deadline = time.monotonic() + 10
    while len(polls) < 6 and time.monotonic() < deadline:
        time.sleep(0.05)
    watch.stop()
    assert len(polls) >= 6
    changes = watch.changes()
    assert [(c["partition"], c["leader"]) for c in changes] == [(0, 1), (1, 2), (0, 3)]
    assert changes[0]["at_ns"] == changes[1]["at_ns"] < changes[2]["at_ns"]  # one poll, one timestamp
