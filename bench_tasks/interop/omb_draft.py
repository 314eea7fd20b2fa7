"""The matrix an OMB import is building, with the account of every OMB field it read (shared by the workload
mapping and each system's driver mapping)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..secrecy import REDACTED, is_secret, redacted, without_userinfo

NOT_CARRIED = "NOT CARRIED: "  # how the account marks a field that could not be carried (each is also a warning)


@dataclass(frozen=True)
class Mapped:
    """One OMB field and where it went: `sixnines` is the matrix path (None when it was not carried)."""

    omb: str
    value: Any
    sixnines: str | None
    sixnines_value: Any = None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "omb": self.omb,
            "value": self.value,
            "sixnines": self.sixnines,
            "sixnines_value": self.sixnines_value,
            "note": self.note,
        }

    @property
    def left_out(self) -> bool:
        return self.note.startswith(NOT_CARRIED)

    def line(self) -> str:
        """One line of the import's report: the OMB field, and what it became or why it set nothing."""
        read = self.omb if self.value is None else f"{self.omb}: {self.value!r}"
        if self.sixnines is None:
            return f"{read} — {self.note}"
        became = f"{read} → {self.sixnines}: {self.sixnines_value!r}"
        return f"{became} ({self.note})" if self.note else became


@dataclass
class Draft:
    """The matrix being built, and the account of every field read."""

    workload_source: str
    driver_source: str | None
    system: str
    workload: dict[str, Any] = field(default_factory=dict)
    broker: dict[str, Any] = field(default_factory=dict)
    client: dict[str, Any] = field(default_factory=dict)
    capacity: dict[str, Any] = field(default_factory=dict)  # a search's terms (OMB's max-rate mode), else empty
    background: dict[str, Any] = field(default_factory=dict)  # unmeasured workloads (OMB's other topics), by name
    measurement: str = "e2e"
    mapped: list[Mapped] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def put(self, omb: str, value: Any, path: str, new: Any, note: str = "") -> None:
        """Set matrix `path` (`workload.x`, `broker.y`, `client.producer.linger.ms`, `capacity.z`,
        `background.name.field`) and record why."""
        section, _, rest = path.partition(".")
        target = getattr(self, section)
        for part in _split(rest)[:-1]:
            target = target.setdefault(part, {})
        target[_split(rest)[-1]] = new
        self.mapped.append(Mapped(omb, shown(omb, value), path, shown(path, new), note))

    def note(self, omb: str, value: Any, note: str) -> None:
        """A field read and understood that sets nothing (its meaning is the harness's default)."""
        self.mapped.append(Mapped(omb, shown(omb, value), None, None, note))

    def warn(self, omb: str, value: Any, note: str) -> None:
        """A field that cannot be carried: recorded, and shown to the user."""
        self.mapped.append(Mapped(omb, shown(omb, value), None, None, f"{NOT_CARRIED}{note}"))
        self.warnings.append(f"{self.where(omb)}: {shown(omb, value)!r} — {note}")

    def refuse(self, omb: str, value: Any, reason: str) -> None:
        self.problems.append(f"{self.where(omb)}: {shown(omb, value)!r} — {reason}")

    def given(self, driver: Mapping[str, Any], name: str, sample: Any) -> Any:
        """A driver file's field `name` when it is there (not null) and has the type of OMB's Java field (`sample`
        is a value of that type); None when it is absent, or refused for its type (the refusal names the field)."""
        value = driver.get(name)
        if value is None:
            return None
        problem = type_problem(sample, value)
        if problem is not None:
            self.refuse(f"driver.{name}", value, problem)
            return None
        return value

    def address(self, omb: str, value: str | list[str], provisioned: str) -> None:
        """An address OMB's driver connects to. The harness starts `provisioned` itself (running ones are a matrix's
        `brokers: external` with a connection), so the address sets nothing; a login written into it is a secret,
        never shown and never carried, and the account says it was left out."""
        urls = value if isinstance(value, list) else [value]
        kept = [without_login(u) for u in urls]
        shown_value = kept if isinstance(value, list) else kept[0]
        where = f"the harness provisions {provisioned} (running ones: `brokers: external` with a connection)"
        if kept != urls:
            self.warn(omb, shown_value, f"{where}; the login in it is not carried: the connection holds one")
        else:
            self.note(omb, shown_value, where)

    def where(self, omb: str) -> str:
        """The file and the field, as the user wrote them."""
        if omb.startswith("driver."):
            return f"{self.driver_source}: {omb.removeprefix('driver.')}"
        return f"{self.workload_source}: {omb}"


def shown(field: str, value: Any) -> Any:
    """A field's value as the import's account shows it (the matrix header, `origin.mapping`, stderr and every
    cell's result.json): a secret (`sasl.jaas.config`, `ssl.truststore.password`) redacted by the one rule."""
    if is_secret(field):
        return REDACTED
    return redacted(value)


def _split(path: str) -> list[str]:
    """`producer.linger.ms` → ["producer", "linger.ms"]: client option names keep their dots."""
    head, _, tail = path.partition(".")
    return [head, tail] if head in ("producer", "consumer", "topic", "server") and tail else path.split(".")


def without_login(url: str) -> str:
    """An address without the `user:password@` (or `token@`) before its host, with a scheme (`nats://u:p@h`) or
    without one (`u:p@h:4222`, as OMB's NATS driver files write addresses)."""
    kept = without_userinfo(url)
    if "://" in kept:
        return kept
    return kept.rpartition("@")[2]


def type_problem(sample: Any, value: Any) -> str | None:
    """What is wrong with `value` for an OMB field of the Java type `sample` has (None when it fits; a None sample
    stands for text, a list for a list of text)."""
    if sample is None or isinstance(sample, str):
        return None if value is None or isinstance(value, str) else "must be text"
    if isinstance(sample, list):
        return None if isinstance(value, list) and all(isinstance(v, str) for v in value) else "must be a list of text"
    if isinstance(sample, bool):
        return None if isinstance(value, bool) else "must be true or false"
    if isinstance(sample, int):
        return None if isinstance(value, int) and not isinstance(value, bool) else "must be a whole number"
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return None if ok else "must be a number"
