"""A matrix's validation errors as its author reads them: one line each, naming the field by its path in the file
(`systems[0].broker.partitions`), what was wrong and the value given, without pydantic's union noise."""

from __future__ import annotations

import re
from typing import Any

from pydantic import ValidationError

from ..secrecy import REDACTED, is_secret
from ..systems import SYSTEMS

# pydantic puts the union tag into error locations: the systems', and the two forms of `repeats:`
_DISCRIMINATOR_TAGS = {*SYSTEMS, "n-times", "by-rule"}


def error_location(err: dict[str, Any]) -> str:
    parts = [str(p) for p in err["loc"] if str(p) not in _DISCRIMINATOR_TAGS]
    text = ".".join(parts)
    return re.sub(r"\.(\d+)(?=\.|$)", r"[\1]", text)


def error_message(err: dict[str, Any]) -> str:
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        return "unknown key (not allowed here)"
    if err["type"] == "literal_error":
        return f"not allowed; {msg[0].lower()}{msg[1:]}"
    return msg.removeprefix("Value error, ")


def error_input(err: dict[str, Any]) -> str:
    if err["type"] == "missing":
        return ""
    value = err.get("input")
    if isinstance(value, dict) and err["type"] != "extra_forbidden":
        return ""
    if isinstance(value, list) and "faults" in err["loc"]:  # the message names the fault and its field
        return ""
    if any(is_secret(part) for part in err["loc"] if isinstance(part, str)):
        return f"{REDACTED!r} — "  # an error names a secret setting, never quotes it
    return f"{value!r} — "


def format_errors(exc: ValidationError, prefix: str = "") -> list[str]:
    def where(err: Any) -> str:
        loc = error_location(err)
        return f"{prefix}.{loc}" if prefix and loc else prefix or loc or "(top level)"

    return [f"{where(err)}: {error_input(err)}{error_message(err)}" for err in exc.errors()]
