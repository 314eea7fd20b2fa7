"""Matrix files: parsing, validation with precise errors, cell expansion.

A matrix has `systems:` (each with versions, broker and client settings and system-specific axes),
one base `workload:`, a list of `measurements:`, global `axes:` (dotted paths into the cell spec) and
`exclude:` rules. Cells are the cartesian product of the axes, minus the excluded ones; every cell is
validated as a whole (by its system's cell model), so a bad axis value is reported with the axis that
produced it. Cell ids and series keys: `spec.cell`.

This module reads and expands; the models are in `matrix_model`, the checks no cell model can make in
`matrix_checks`, the error lines in `matrix_errors`, repeats in `repeats` and axis paths in `dotted`.
"""

from __future__ import annotations

import copy
import itertools
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ..errors import MatrixError
from .cell import (
    EXTERNAL_VERSION,
    cell_id,
    series_key,
)
from .dotted import set_path
from .matrix_checks import check_axes, check_base, check_block, check_excludes, check_repeat_rules
from .matrix_errors import format_errors
from .matrix_model import CELL_ADAPTER, AnyCell, Cell, Matrix, MatrixFile, SystemBlock
from .repeats import repeats_for, rule_matches
from .versions import expanded


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
    problems += check_excludes(file)
    problems += check_repeat_rules(file)
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
                problems += format_errors(exc, prefix=f"systems[{index}]")
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
            problems += format_errors(exc)
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
    problems = check_block(block, where)
    if problems:
        return problems, []
    entries = block.versions if isinstance(block.versions, list) else [block.versions] if block.versions else []
    versions, problems = expanded(block.system, entries, where) if entries else ([EXTERNAL_VERSION], [])
    if problems:
        return problems, []
    axes = {"version": versions, "measurement": list(file.measurements), **file.axes, **block.axes}
    problems = check_axes(axes, where, file.axes.keys())
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
    problems = check_base(base, where, axes, top_faults=block.faults is None)
    if problems:
        return problems, []
    cells = []
    for combo in itertools.product(*axes.values()):
        chosen = dict(zip(axes.keys(), combo, strict=True))
        if any(rule_matches(rule, chosen) for rule in file.exclude):
            continue
        spec = copy.deepcopy(base)
        for axis_path, value in chosen.items():
            set_path(spec, axis_path, value)
        try:
            validated = CELL_ADAPTER.validate_python(spec)
        except ValidationError as exc:
            label = ", ".join(f"{k}={v!r}" for k, v in chosen.items())
            problems += [f"cell ({label}): {p}" for p in format_errors(exc)]
            continue
        validated = _only_used_hosts(validated)
        cells.append(
            Cell(
                id=cell_id(validated),
                series_key=series_key(validated),
                matrix=file.name,
                spec=validated,
                repeats=repeats_for(file.repeats, chosen),
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
