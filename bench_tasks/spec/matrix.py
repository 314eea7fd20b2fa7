"""Matrix files: parsing, validation with precise errors, cell expansion.

A matrix has `systems:` (each with versions, broker and client settings and system-specific axes),
one base `workload:`, a list of `measurements:`, global `axes:` (dotted paths into the cell spec) and
`exclude:` rules. Cells are the cartesian product of the axes, minus the excluded ones; every cell is
validated as a whole (by its system's cell model), so a bad axis value is reported with the axis that
produced it. Cell ids and series keys: `spec.cell`.
"""

from __future__ import annotations

import copy
import itertools
import re
from pathlib import Path
from typing import Annotated, Any, Union

import yaml
from pydantic import Discriminator, Field, Tag, TypeAdapter, ValidationError, field_validator

from ..errors import MatrixError
from ..secrecy import REDACTED, is_secret, recorded_model, remember_model
from ..systems import SYSTEMS, system_of
from .base import StrictModel
from .capacity import CapacitySpec
from .cell import (
    EXTERNAL_VERSION,
    BrokerSource,
    CellBase,
    Measurement,
    cell_id,
    series_key,
)
from .placement import HOST_NAME, Host
from .versions import VersionEntry, VersionRange, expanded

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

_BACKGROUND_PASSTHROUGH = re.compile(r"^background\.([^.]+)\.(producer|topic)\.(.+)$")


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


def load_matrix(path: str | Path) -> Matrix:
    """Read, validate and expand a matrix file. Raises MatrixError naming the file and each bad field."""
    path = Path(path)
    source = str(path)
    raw = yaml_mapping(read_matrix_text(path), source)
    return parse_matrix(raw, source)


def read_matrix_text(path: Path) -> str:
    """The file's text, or a MatrixError saying in words why it cannot be read (never an OSError)."""
    source = str(path)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise MatrixError(source, ["file not found"]) from None
    except IsADirectoryError:
        raise MatrixError(source, ["is a folder; give a matrix file (matrices/*.yaml)"]) from None
    except PermissionError:
        raise MatrixError(source, ["not readable (permission denied)"]) from None
    except UnicodeDecodeError as exc:
        bad = f"byte {exc.object[exc.start]:#04x} at offset {exc.start}"
        raise MatrixError(source, [f"not UTF-8 text ({bad})"]) from None
    except OSError as exc:
        raise MatrixError(source, [f"cannot be read: {exc.strerror or exc}"]) from None


def yaml_mapping(text: str, source: str) -> dict[str, Any]:
    """Parse YAML text that must hold a mapping; syntax errors name the file, line and column."""
    try:
        raw = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        what = ": ".join(part for part in (exc.context, exc.problem) if part)
        raise MatrixError(source, [f"not valid YAML: {where}{what}"]) from None
    except yaml.YAMLError as exc:
        raise MatrixError(source, [f"not valid YAML: {exc}"]) from None
    if not isinstance(raw, dict):
        raise MatrixError(source, [f"top level must be a mapping, got {type(raw).__name__}"])
    return raw


def parse_matrix(raw: dict[str, Any], source: str) -> Matrix:
    """Validate an already-parsed matrix mapping; `source` names it in errors."""
    try:
        return _parse_matrix(raw, source)
    except ValueError as exc:  # a structural problem found while expanding (not a pydantic error)
        if isinstance(exc, ValidationError):
            raise
        raise MatrixError(source, [str(exc)]) from None


def _parse_matrix(raw: dict[str, Any], source: str) -> Matrix:
    file, block_indices, problems = _validate_file(raw)
    if file is None:
        raise MatrixError(source, problems)
    cells: dict[str, Cell] = {}
    for block_index, block in zip(block_indices, file.systems, strict=True):
        block_problems, block_cells = _expand_block(file, block, f"systems[{block_index}]")
        problems += block_problems
        for cell in block_cells:
            cells.setdefault(cell.id, cell)
    problems += _check_excludes(file)
    problems += _check_repeat_rules(file)
    if problems:  # blocks share the workload: its problems would otherwise repeat once per block
        raise MatrixError(source, list(dict.fromkeys(problems)))
    if not cells:
        raise MatrixError(source, ["the exclude rules remove every cell"])
    return Matrix(
        name=file.name,
        source=source,
        description=file.description,
        schedule=file.schedule,
        cells=list(cells.values()),
        capacity=file.capacity,
        reuse_published=file.reuse_published,
    )


def _validate_file(raw: dict[str, Any]) -> tuple[MatrixFile | None, list[int], list[str]]:
    """The file as a model, the original index of each system block kept, and every problem found.

    Independent problems are all reported in one run: each system block is validated on its own, and the
    parts of the file that fail are set aside (dropped, or a required name given a placeholder) so the rest
    can still be checked. None when what is left cannot be expanded at all."""
    raw = copy.deepcopy(raw)
    problems: list[str] = []
    indices: list[int] = []
    if isinstance(raw.get("systems"), list):
        good = []
        for index, entry in enumerate(raw["systems"]):
            try:
                SystemBlock.model_validate(entry)
            except ValidationError as exc:
                problems += _format_errors(exc, prefix=f"systems[{index}]")
                continue
            good.append(entry)
            indices.append(index)
        if raw["systems"] and not good:
            return None, [], problems
        raw["systems"] = good
    for _ in range(len(MatrixFile.model_fields) + 1):
        try:
            return MatrixFile.model_validate(raw), indices, problems
        except ValidationError as exc:
            problems += _format_errors(exc)
            if not _set_aside(raw, exc.errors()):
                return None, indices, problems
    return None, indices, problems


# A required top-level value that is wrong gets this stand-in, so the rest of the file can still be checked.
_PLACEHOLDERS = {"name": "matrix"}


def _set_aside(raw: dict[str, Any], errors: list[Any]) -> bool:
    """Remove (or stand in for) what each error points at; False when a required part cannot be replaced."""
    doomed: dict[str, set[Any]] = {}
    for err in errors:
        key, *rest = err["loc"]
        container = raw.get(key)
        if rest and isinstance(container, dict | list) and key not in ("workload", "repeats", "network", "capacity"):
            doomed.setdefault(key, set()).add(rest[0])
        elif key in _PLACEHOLDERS:
            raw[key] = _PLACEHOLDERS[key]
        elif key not in MatrixFile.model_fields or not MatrixFile.model_fields[key].is_required():
            raw.pop(key, None)
        else:
            return False
    for key, members in doomed.items():
        container = raw[key]
        if isinstance(container, list):
            raw[key] = [item for i, item in enumerate(container) if i not in members]
        else:
            raw[key] = {k: v for k, v in container.items() if k not in members}
    return True


def _expand_block(file: MatrixFile, block: SystemBlock, where: str) -> tuple[list[str], list[Cell]]:
    """The cells of one system block, or the problems that stop it (reported against the block's fields)."""
    problems = _check_block(block, where)
    if problems:
        return problems, []
    entries = block.versions if isinstance(block.versions, list) else [block.versions] if block.versions else []
    versions, problems = expanded(block.system, entries, where) if entries else ([EXTERNAL_VERSION], [])
    if problems:
        return problems, []
    axes = {"version": versions, "measurement": list(file.measurements), **file.axes, **block.axes}
    problems = _check_axes(axes, where, file.axes.keys())
    if problems:
        return problems, []
    base = {
        "system": block.system,
        "brokers": block.brokers,
        "connection": block.connection,
        "broker": block.broker,
        "client": block.client,
        "background": block.background,
        "workload": file.workload,
    }
    if file.hosts:
        base["hosts"] = {name: host.model_dump(mode="json") for name, host in file.hosts.items()}
    if file.network is not None:
        base["network"] = file.network
    faults = block.faults if block.faults is not None else file.faults
    if faults:
        base["faults"] = faults
    problems = _check_base(base, where, axes, top_faults=block.faults is None)
    if problems:
        return problems, []
    cells = []
    for combo in itertools.product(*axes.values()):
        chosen = dict(zip(axes.keys(), combo, strict=True))
        if any(_matches(rule, chosen) for rule in file.exclude):
            continue
        spec = copy.deepcopy(base)
        for axis_path, value in chosen.items():
            _set_path(spec, axis_path, value)
        try:
            validated = CELL_ADAPTER.validate_python(spec)
        except ValidationError as exc:
            label = ", ".join(f"{k}={v!r}" for k, v in chosen.items())
            problems += [f"cell ({label}): {p}" for p in _format_errors(exc)]
            continue
        validated = _only_used_hosts(validated)
        cells.append(
            Cell(
                id=cell_id(validated),
                series_key=series_key(validated),
                matrix=file.name,
                spec=validated,
                repeats=_repeats_for(file.repeats, chosen),
                origin=file.origin,
            )
        )
    return problems, cells


def _only_used_hosts(cell: AnyCell) -> AnyCell:
    """A cell carries only the hosts its placement uses (none without a placement), so adding a host to the
    matrix does not change the ids of cells that do not use it."""
    placement = cell.workload.placement
    used = placement.all_hosts() if placement else []
    hosts = {name: host for name, host in (cell.hosts or {}).items() if name in used}
    return cell.model_copy(update={"hosts": hosts or None})


def _check_block(block: SystemBlock, where: str) -> list[str]:
    """`brokers`/`connection`/`versions` of one system block, reported against the block's own fields."""
    if block.brokers == "external":
        if not block.connection:
            return [f"{where}.connection: required when brokers is 'external' (an Airflow connection id)"]
        if block.versions not in (None, [EXTERNAL_VERSION]):
            return [
                f"{where}.versions: {block.versions!r} — external brokers report their own version (recorded in "
                f"the context); use [{EXTERNAL_VERSION}] or leave versions out"
            ]
        return []
    problems = []
    if block.connection is not None:
        problems.append(f"{where}.connection: {block.connection!r} — only for brokers 'external'")
    if block.versions is None:
        problems.append(f"{where}.versions: Field required")
    elif block.versions == []:
        problems.append(f"{where}.versions: [] — give at least one release, line (4.3.x), range or latest")
    return problems


def _check_axes(axes: dict[str, list[Any]], where: str, global_keys: Any) -> list[str]:
    problems = []
    for axis_path, values in axes.items():
        origin = f"axes.{axis_path}" if axis_path in global_keys else f"{where}.axes.{axis_path}"
        if axis_path in ("version", "measurement"):
            origin = f"{where}.versions" if axis_path == "version" else "measurements"
        root = axis_path.split(".")[0]
        whole = axis_path in WHOLE_VALUE_AXES
        if root not in AXIS_ROOTS or (axis_path in AXIS_ROOTS and not whole) or (root == "faults" and not whole):
            problems.append(
                f"{origin}: unknown axis path {axis_path!r}; an axis is 'version', 'measurement', 'faults' (each "
                f"value a list of faults) or a dotted path under workload., broker., client., background. or network."
            )
        elif not values:
            problems.append(f"{origin}: empty list; an axis needs at least one value")
    return problems


def _check_base(base: dict[str, Any], where: str, axes: dict[str, list[Any]], top_faults: bool = True) -> list[str]:
    """Validate each axis value on its own against the base, so errors name the axis and index. `top_faults`:
    the cell's faults are the file's own (not the block's), so their problems are named at the top level."""
    problems = []
    for axis_path, values in axes.items():
        for index, value in enumerate(values):
            spec = copy.deepcopy(base)
            for other, other_values in axes.items():  # fill other axes with their first value
                _set_path(spec, other, other_values[0])
            _set_path(spec, axis_path, value)
            try:
                CELL_ADAPTER.validate_python(spec)
            except ValidationError as exc:
                for err in exc.errors():
                    loc = _loc(err)
                    if loc == axis_path or loc.startswith(axis_path + ".") or axis_path.startswith(loc + "."):
                        origin = (
                            f"{where}.versions[{index}]"
                            if axis_path == "version"
                            else f"measurements[{index}]"
                            if axis_path == "measurement"
                            else f"axes.{axis_path}[{index}]"
                        )
                        problems.append(f"{origin}: {value!r} — {_message(err)}")
    # Errors in the base itself (not caused by an axis) are reported against the base's own path.
    spec = copy.deepcopy(base)
    for axis_path, values in axes.items():
        _set_path(spec, axis_path, values[0])
    try:
        CELL_ADAPTER.validate_python(spec)
    except ValidationError as exc:
        for err in exc.errors():
            loc = _loc(err)
            if not any(loc == a or loc.startswith(a + ".") or a.startswith(loc + ".") for a in axes):
                top_keys = ("workload", "hosts", "network", *(("faults",) if top_faults else ()))
                top = re.split(r"[.\[]", loc)[0] in top_keys
                where_loc = loc if top else f"{where}.{loc}" if loc else where
                problems.append(f"{where_loc}: {_input(err)}{_message(err)}")
    return list(dict.fromkeys(_fault_named(p) for p in problems))


def _fault_named(problem: str) -> str:
    """`systems[0].faults: faults[1].action: …` → `systems[0].faults[1].action: …` (the message names the fault);
    a cell-wide check's `systems[0]: broker.leader: …` → `systems[0].broker.leader: …` likewise."""
    problem = re.sub(r"(^|\.)faults: faults\[", r"\1faults[", problem)
    return re.sub(r"^(systems\[\d+\]): broker\.leader: ", r"\1.broker.leader: ", problem)


def _check_excludes(file: MatrixFile) -> list[str]:
    known = _known_axes(file)
    return [
        f"exclude[{i}].{key}: not an axis of this matrix; axes are: {', '.join(sorted(known))}"
        for i, rule in enumerate(file.exclude)
        for key in rule
        if key not in known
    ]


def _known_axes(file: MatrixFile) -> set[str]:
    known = {"version", "measurement", *file.axes}
    for block in file.systems:
        known |= set(block.axes)
    return known


def _check_repeat_rules(file: MatrixFile) -> list[str]:
    if isinstance(file.repeats, int):
        return []
    known = _known_axes(file)
    return [
        f"repeats[{i}].when.{key}: not an axis of this matrix; axes are: {', '.join(sorted(known))}"
        for i, rule in enumerate(file.repeats)
        for key in rule.when
        if key not in known
    ]


def _repeats_for(repeats: int | list[RepeatRule], chosen: dict[str, Any]) -> int:
    if isinstance(repeats, int):
        return repeats
    return next((rule.times for rule in repeats if _matches(rule.when, chosen)), 1)


def expand_repeats(cells: list[Cell]) -> list[Cell]:
    """Every run of every cell, in rounds: all cells once, then the repeated ones again, and so on. Spreading a
    cell's repeats over the sweep (rather than back to back) lets slow drifts of the host show up as
    run-to-run variation instead of hiding inside one cell's repeats."""
    rounds = max((c.repeats for c in cells), default=1)
    return [c.model_copy(update={"repeat": r}) for r in range(1, rounds + 1) for c in cells if r <= c.repeats]


def _matches(rule: dict[str, Any], chosen: dict[str, Any]) -> bool:
    def hit(key: str, wanted: Any) -> bool:
        if key not in chosen:
            return False
        options = wanted if isinstance(wanted, list) else [wanted]
        return chosen[key] in options

    return all(hit(k, v) for k, v in rule.items())


def _set_path(spec: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = _split_path(dotted)
    node = spec
    for part in parents:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ValueError(f"axis {dotted!r}: {part!r} is not a mapping, so it has no key {leaf!r}")
    node[leaf] = value


def _split_path(dotted: str) -> list[str]:
    """`client.producer.linger.ms` → ["client", "producer", "linger.ms"]: native option names keep their dots."""
    for prefix in PASSTHROUGH_MAPS:
        if dotted.startswith(prefix + "."):
            return [*prefix.split("."), dotted[len(prefix) + 1 :]]
    background_map = _BACKGROUND_PASSTHROUGH.match(dotted)
    if background_map:
        return ["background", *background_map.groups()]
    return dotted.split(".")


# pydantic puts the union tag into error locations: the systems', and the two forms of `repeats:`
_DISCRIMINATOR_TAGS = {*SYSTEMS, "n-times", "by-rule"}


def _loc(err: dict[str, Any]) -> str:
    parts = [str(p) for p in err["loc"] if str(p) not in _DISCRIMINATOR_TAGS]
    text = ".".join(parts)
    return re.sub(r"\.(\d+)(?=\.|$)", r"[\1]", text)


def _message(err: dict[str, Any]) -> str:
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        return "unknown key (not allowed here)"
    if err["type"] == "literal_error":
        return f"not allowed; {msg[0].lower()}{msg[1:]}"
    return msg.removeprefix("Value error, ")


def _input(err: dict[str, Any]) -> str:
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


def _format_errors(exc: ValidationError, prefix: str = "") -> list[str]:
    def where(err: Any) -> str:
        loc = _loc(err)
        return f"{prefix}.{loc}" if prefix and loc else prefix or loc or "(top level)"

    return [f"{where(err)}: {_input(err)}{_message(err)}" for err in exc.errors()]
