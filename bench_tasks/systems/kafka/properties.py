"""server.properties (and client .properties) as Kafka reads them: rendered with Java's escapes, secrets redacted
before anything is recorded.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any


def redacted(settings: Mapping[str, Any]) -> dict[str, Any]:
    """`settings` with every secret (passwords, JAAS configs that embed them) replaced, for the record."""
    secret = ("password", "jaas")
    return {k: "<redacted>" if any(word in str(k).lower() for word in secret) else v for k, v in settings.items()}


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
