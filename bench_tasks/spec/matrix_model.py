"""What a matrix file is, as models: its system blocks, repeat rules and top-level settings (`MatrixFile`), the cells
it expands to (`Cell`: a spec plus its id, series key and repeat) and the matrix a run takes (`Matrix`). Every
system's cell model joins one union (`CellSpec`), told apart by `system`."""

from __future__ import annotations

import re
from typing import Annotated, Any, Union

from pydantic import Discriminator, Field, Tag, TypeAdapter, field_validator

from ..secrecy import recorded_model, remember_model
from ..systems import SYSTEMS, system_of
from .base import StrictModel
from .capacity import CapacitySpec
from .cell import (
    BrokerSource,
    CellBase,
    Measurement,
)
from .placement import HOST_NAME, Host
from .versions import VersionEntry, VersionRange

AXIS_ROOTS = ("version", "measurement", "workload", "broker", "client", "background", "network", "faults")
WHOLE_VALUE_AXES = ("version", "measurement", "faults")  # axes whose values replace the key whole
MAX_REPEATS = 100

AnyCell = CellBase  # statically any system's cell; at run time the union of the registered systems' models
CellSpec = Annotated[Union[tuple(s.cell_model for s in SYSTEMS.values())], Field(discriminator="system")]  # noqa: UP007
CELL_ADAPTER: TypeAdapter[AnyCell] = TypeAdapter(CellSpec)

# Maps whose keys are the client's or broker's own option names (which may contain dots, like linger.ms):
# in an axis path everything after one of these prefixes is a single key.
PASSTHROUGH_MAPS = (
    "client.connect",
    "client.producer",
    "client.consumer",
    "broker.server",
    "broker.topic",
)

BACKGROUND_PASSTHROUGH = re.compile(r"^background\.([^.]+)\.(producer|topic)\.(.+)$")


class SystemBlock(StrictModel):
    system: str
    versions: list[VersionEntry] | VersionRange | None = Field(
        None, description="releases, lines (4.3.x), latest or ranges ({from, to, every}); required unless external"
    )
    brokers: BrokerSource = "provisioned"
    connection: str | None = None
    broker: dict[str, Any] = Field(default_factory=dict)
    client: dict[str, Any] = Field(default_factory=dict)
    background: dict[str, Any] = Field(default_factory=dict)
    faults: list[Any] | None = Field(None, description="this system's faults (instead of the top-level ones)")
    axes: dict[str, list[Any]] = Field(default_factory=dict)

    @field_validator("system")
    @classmethod
    def _known_system(cls, value: str) -> str:
        if value not in SYSTEMS:
            raise ValueError(f"unknown system {value!r}; known: {', '.join(sorted(SYSTEMS))}")
        return value


class RepeatRule(StrictModel):
    """Cells whose axis values match `when` (as in `exclude:`; an empty `when` matches every cell) run `times`
    times. The first matching rule decides."""

    when: dict[str, Any] = Field(default_factory=dict)
    times: int = Field(ge=1, le=MAX_REPEATS)


class MatrixFile(StrictModel):
    """The file as written, before expansion."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_]*$")
    description: str = ""
    schedule: str | None = None
    systems: list[SystemBlock] = Field(min_length=1)
    workload: dict[str, Any]
    measurements: list[Measurement] = Field(min_length=1)
    axes: dict[str, list[Any]] = Field(default_factory=dict)
    exclude: list[dict[str, Any]] = Field(default_factory=list)
    repeats: Annotated[
        Annotated[int, Tag("n-times"), Field(ge=1, le=MAX_REPEATS)] | Annotated[list[RepeatRule], Tag("by-rule")],
        Discriminator(lambda v: "by-rule" if isinstance(v, list) else "n-times"),
    ] = Field(
        1,
        description="run every cell N times (an integer), or per cell by rules like exclude's; the tables and "
        "report then show each percentile's min/median/max across the repeats and its % variation",
    )
    hosts: dict[str, Host] = Field(default_factory=dict, description="load-generator and broker hosts by name")
    reuse_published: bool = Field(
        False,
        description="a cell already published (the same cell id: spec and release) is not measured again; its "
        "published tables stand for it (a release history's backfill measures only what is missing)",
    )
    network: dict[str, Any] | None = Field(None, description="bandwidth cap on network-namespace links (tc tbf)")
    faults: list[Any] = Field(default_factory=list, description="faults during the measure phase (spec.faults)")
    origin: dict[str, Any] | None = Field(
        None, description="where the matrix came from (an import's field-by-field mapping); kept with each cell"
    )
    capacity: CapacitySpec | None = Field(
        None, description="search each cell's highest rate under latency objectives instead of running it once"
    )

    @field_validator("hosts")
    @classmethod
    def _host_names(cls, value: dict[str, Host]) -> dict[str, Host]:
        for name in value:
            if not HOST_NAME.match(name):
                raise ValueError(f"host name {name!r}: use lower case letters, digits and underscores")
        return value


class Cell(StrictModel):
    """A validated cell with its identity, and which of its repeats this is.

    The repeat is not part of the spec: every repeat of a cell has the same cell id and series key (they
    measure the same thing); `instance` tells them apart wherever one run of the cell needs a name of its own
    (staging folders, topics, Airflow task groups). A cell that is not repeated keeps its id as its name."""

    id: str
    series_key: str
    matrix: str
    spec: CellSpec  # the registered systems' cell models, chosen by `system`
    repeat: int = Field(1, ge=1)
    repeats: int = Field(1, ge=1)
    origin: dict[str, Any] | None = None  # the matrix's `origin:`; not part of the spec, so never of the id
    release: dict[str, Any] | None = None  # how a run chose the version of `latest` or a line (recorded)

    def model_post_init(self, context: Any, /) -> None:
        """Every process that holds a cell knows its secrets, so no record it writes can carry one
        (`secrecy.remember_model`)."""
        remember_model(self.spec)

    def recorded(self) -> dict[str, Any]:
        """The cell's JSON dump as records hold it: its spec's secrets redacted (`secrecy.recorded_model`)."""
        return recorded_model(self)

    @property
    def instance(self) -> str:
        return self.id if self.repeats == 1 else f"{self.id}-r{self.repeat}"

    @property
    def lake_repeat(self) -> int | None:
        """The repeat as the lake's raw layout names it: None (no repeat folder) for a cell run once."""
        return None if self.repeats == 1 else self.repeat

    @property
    def label(self) -> str:
        """Short human description for progress lines and tables."""
        s, w = self.spec, self.spec.workload
        setup = system_of(s).label(s)
        if getattr(s.broker, "leader", None) is not None:  # only systems that place a leader have the key
            setup += f" leader={s.broker.leader}"
        if s.brokers == "external":
            setup += f" ext:{s.connection}"
        return (
            f"{setup} {s.version} {s.measurement} {w.message_size_bytes}B "
            f"@{w.rate_per_s:g}/s p{w.producers} c{w.consumers}"
            + (f" x{w.connections}conn" if w.connections > 1 else "")
            + (f" x{w.relays}relays" if s.measurement == "chain" else "")
            + (f" +{w.lagging_consumers} lagging" if w.lagging_consumers else "")
            + "".join(
                f" +bg {name}:{bg.producers}x{bg.message_size_bytes}B@{bg.rate_per_producer_per_s:g}/s"
                + ("" if bg.keys == "none" else f" keys={bg.keys}")
                + ("" if bg.subscriptions == 1 else f" subs={bg.subscriptions}")
                for name, bg in s.background.items()
                if bg.producers
            )
            + (f" on {'+'.join(w.placement.load_hosts()) or 'local'}" if w.placement else "")
            + (f" broker@{'+'.join(w.placement.broker_hosts())}" if w.placement and w.placement.broker else "")
            + (f" cap {s.network.rate_mbit:g}Mbit" if s.network else "")
            + "".join(f" fault:{f.short()}" for f in s.faults)
        )


class Matrix(StrictModel):
    name: str
    source: str
    description: str
    schedule: str | None
    cells: list[Cell]
    capacity: CapacitySpec | None = None
    reuse_published: bool = False
