"""What every settings model shares: strictness (unknown keys are errors, values frozen once validated), settings
of one line each, and the smallest message the harness can send."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from ..core.header import HEADER_SIZE


class StrictModel(BaseModel):
    """Unknown keys are errors, and models are immutable once validated."""

    model_config = ConfigDict(extra="forbid", frozen=True)


# C0 controls (line feed, carriage return and tab among them), DEL, C1 controls, and Unicode's line and paragraph
# separators: whatever a config parser, a shell or a terminal may read as the end of a line or a field.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_ONE_LINE = "a setting is one line of printable text (a line break would start a config line of its own)"
_CONTROL_NAMES = {"\n": "line feed", "\r": "carriage return", "\t": "tab", "\x00": "NUL"}


class SettingsModel(StrictModel):
    """Settings that reach a broker's config file, a VM's command line or a client library: no key or value holds a
    control character, in any field, however deeply nested in a pass-through map.

    Each system writes its config as lines (`directive value`, `key = value`, `key: value`) and each guards the
    keys the harness owns by name; a line break inside a value or a key would end the line and start one the
    harness never wrote (`maxmemory 1gb` + `bind 0.0.0.0`), past every such guard. Checking here, once, covers every
    system's maps, present and future, and each system's renderer stays a plain writer. Tabs are refused too:
    redis.conf and rabbitmq.conf split on them like spaces and java.util.Properties ends a key at one, no native
    option needs one, and in a YAML matrix one is invisible."""

    @field_validator("*")
    @classmethod
    def _single_line(cls, value: Any, info: ValidationInfo) -> Any:
        problem = control_character(value, str(info.field_name))
        if problem is not None:
            raise ValueError(problem)
        return value


def control_character(value: Any, path: str) -> str | None:
    """Why `value` (named `path`) cannot be a setting: the first control character in a key or string value of it,
    through nested maps and lists, named by where it is; None when there is none. Models in it checked themselves."""
    if isinstance(value, str):
        found = _CONTROL.search(value)
        return f"{path}: {_described(found.group())} in the value; {_ONE_LINE}" if found else None
    if isinstance(value, Mapping):
        return next(filter(None, (_in_entry(path, key, item) for key, item in value.items())), None)
    if isinstance(value, list | tuple):
        return next(filter(None, (control_character(item, f"{path}[{i}]") for i, item in enumerate(value))), None)
    return None


def _in_entry(path: str, key: Any, value: Any) -> str | None:
    text = str(key)
    found = _CONTROL.search(text)
    if found:
        return f"{path}: {_described(found.group())} in the key {text!r}; {_ONE_LINE}"
    return control_character(value, setting_path(path, text))


def setting_path(path: str, key: str) -> str:
    """`server` + `maxmemory` → `server.maxmemory`; a key with dots of its own is quoted: `producer['linger.ms']`."""
    return f"{path}.{key}" if re.fullmatch(r"[A-Za-z0-9_-]+", key) else f"{path}[{key!r}]"


def _described(char: str) -> str:
    name = _CONTROL_NAMES.get(char)
    return f"control character U+{ord(char):04X}" + (f" ({name})" if name else "")


def _holds_header(value: int) -> int:
    if value < HEADER_SIZE:
        raise ValueError(f"must be at least the {HEADER_SIZE}-byte payload header")
    return value


# Every sixnines message carries the payload header, so no workload may ask for a smaller one.
MessageSizeBytes = Annotated[int, Field(gt=0), AfterValidator(_holds_header)]
