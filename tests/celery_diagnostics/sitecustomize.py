"""Loaded at start-up by every process of the test Celery deployment (tests/airflow_celery.py puts this folder
first on their PYTHONPATH; nothing else has a sitecustomize here): a process whose Python handler for SIGTERM,
SIGINT, SIGHUP or SIGQUIT runs says so in its log first, with its PID and the time.

An Airflow CLI process in the foreground ends with exit(0) on SIGTERM or SIGINT (airflow.utils.cli.sigint_handler)
without a word, so a worker that "exited 0" during start-up otherwise leaves no trace of a signal (a CI run saw
one; its log had nothing). The sender is not known to Python; the time places it among the test's events.

It also makes the deployment's filesystem broker write each message file whole (`atomic_messages.py`)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

Handler = Callable[[int, FrameType | None], Any]

_WATCHED = frozenset({signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT})
_install = signal.signal


def _said(handler: Handler) -> Handler:
    def said(signum: int, frame: FrameType | None) -> Any:
        now = time.time()
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now)) + f".{int(now % 1 * 1000):03d}"
        name = signal.Signals(signum).name
        line = f"\n[sixnines test diagnostics] pid {os.getpid()} received {name} at {stamp} ({handler!r})\n"
        with contextlib.suppress(OSError):
            os.write(2, line.encode())
        return handler(signum, frame)

    said.__wrapped__ = handler  # type: ignore[attr-defined]
    return said


def _signal(signum: int, handler: Any) -> Any:  # signal.signal's own signature
    if signum in _WATCHED and callable(handler) and not hasattr(handler, "__wrapped__"):
        handler = _said(handler)
    return _install(signum, handler)


signal.signal = _signal  # type: ignore[assignment]
if os.environ.get("AIRFLOW__CELERY__BROKER_URL") == "filesystem://":
    import atomic_messages  # noqa: F401  (patches kombu's filesystem transport)
