"""Kombu's filesystem transport, with each message file written whole before a worker can see it.

The transport creates a message file under its final name, then locks and writes it; a worker that lists the
folder in between moves the empty file away (a rename ignores the lock) and fails to decode it. Celery calls
that unrecoverable and the worker exits, so the task it would have taken waits forever (a clean-clone run lost
its default worker so, and the DAG run hung). Here the file is written under a name no queue reads
(`….msg.part`), then renamed to its final name, which is atomic within the folder.
"""

from __future__ import annotations

import os
import uuid
from time import monotonic
from typing import Any

from kombu.transport import filesystem
from kombu.utils.json import dumps


def _put_whole(self: Any, queue: str, payload: Any, **kwargs: Any) -> None:
    """`Channel._put`, its message written under a temporary name first."""
    name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
    final = os.path.join(self.data_folder_out, name)
    with open(final + ".part", "wb") as part:
        part.write(dumps(payload).encode())
    os.rename(final + ".part", final)


filesystem.Channel._put = _put_whole
