"""LeaderWatch over an injected poll function (the cluster's answer at each poll): every change recorded once,
an election (no leader known) recorded as nothing, a failed poll counted and logged, never silently dropped."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest

from bench_tasks.brokers.leaders import LeaderWatch
from bench_tasks.errors import BrokerError


def test_each_change_is_recorded_once_and_elections_and_errors_are_skipped(caplog: pytest.LogCaptureFixture) -> None:
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

    caplog.set_level(logging.INFO, logger="bench_tasks.brokers.leaders")
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
    assert watch.poll_errors() == {"count": 1, "last": "BrokerError: no metadata"}
    messages = [r.getMessage() for r in caplog.records]
    assert any("leader poll failed" in m and "no metadata" in m for m in messages), messages
    assert any("answers again after 1 failed poll" in m for m in messages), messages


def test_a_poll_that_keeps_failing_is_counted_every_time_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    """A broker stalled for seconds fails every poll: each counts, the log gets one line, not four a second."""
    polls = []

    def poll() -> dict[int, int]:
        polls.append(1)
        raise TimeoutError("metadata request timed out")

    caplog.set_level(logging.INFO, logger="bench_tasks.brokers.leaders")
    watch = LeaderWatch(poll)
    watch.start()
    deadline = time.monotonic() + 10
    while len(polls) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    watch.stop()
    errors = watch.poll_errors()
    assert errors["count"] == len(polls) >= 4 and errors["last"] == "TimeoutError: metadata request timed out"
    assert sum("leader poll failed" in r.getMessage() for r in caplog.records) == 1


def test_a_leader_is_known_once_a_poll_names_one() -> None:
    """The cell's t0 waits for it: a route that does not exist yet, or is electing, names no leader."""
    answers: Iterator[dict[int, int]] = iter([{}, {}])
    watch = LeaderWatch(lambda: next(answers, {0: 2}))
    assert not watch.wait_known(0.05)  # not started: nothing polled
    watch.start()
    try:
        assert watch.wait_known(5)
        assert [(c["partition"], c["leader"]) for c in watch.changes()] == [(0, 2)]
    finally:
        watch.stop()


def test_a_poll_that_never_names_a_leader_gives_up_after_the_timeout() -> None:
    watch = LeaderWatch(dict)
    watch.start()
    try:
        started = time.monotonic()
        assert not watch.wait_known(0.3)
        assert time.monotonic() - started >= 0.29
    finally:
        watch.stop()
