"""server.properties (and client .properties) as Kafka reads them, rendered with Java's escapes. What is recorded
is redacted first, by the harness's one rule (`bench_tasks.secrecy`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any


def render_properties(settings: Mapping[str, Any]) -> str:
    """server.properties text. Values are written as Kafka parses them (booleans lower-case, lists
    comma-joined); backslashes, line breaks and key separators are escaped as java.util.Properties requires."""
    return "".join(f"{_escape(str(key), key=True)}={_escape(config_value(value))}\n" for key, value in settings.items())


def config_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(config_value(v) for v in value)
    return str(value)


def _escape(text: str, key: bool = False) -> str:
    text = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    if key:
        text = re.sub(r"([=: #!])", r"\\\1", text)
    elif text.startswith(" "):
        text = "\\" + text
    return text
