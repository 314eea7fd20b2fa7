"""The checks of a matrix that no single cell model can make: axes that name real settings, base values that fit
the block, exclude and repeat rules that name axes the matrix has."""

from __future__ import annotations

import copy
import re
from typing import Any

from pydantic import ValidationError

from .cell import (
    EXTERNAL_VERSION,
)
from .dotted import set_path
from .matrix_errors import error_input, error_location, error_message
from .matrix_model import AXIS_ROOTS, CELL_ADAPTER, WHOLE_VALUE_AXES, MatrixFile, SystemBlock


def check_block(block: SystemBlock, where: str) -> list[str]:
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


def check_axes(axes: dict[str, list[Any]], where: str, global_keys: Any) -> list[str]:
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


def check_base(base: dict[str, Any], where: str, axes: dict[str, list[Any]], top_faults: bool = True) -> list[str]:
    """Validate each axis value on its own against the base, so errors name the axis and index. `top_faults`:
    the cell's faults are the file's own (not the block's), so their problems are named at the top level."""
    problems = []
    for axis_path, values in axes.items():
        for index, value in enumerate(values):
            spec = copy.deepcopy(base)
            for other, other_values in axes.items():  # fill other axes with their first value
                set_path(spec, other, other_values[0])
            set_path(spec, axis_path, value)
            try:
                CELL_ADAPTER.validate_python(spec)
            except ValidationError as exc:
                for err in exc.errors():
                    loc = error_location(err)
                    if loc == axis_path or loc.startswith(axis_path + ".") or axis_path.startswith(loc + "."):
                        origin = (
                            f"{where}.versions[{index}]"
                            if axis_path == "version"
                            else f"measurements[{index}]"
                            if axis_path == "measurement"
                            else f"axes.{axis_path}[{index}]"
                        )
                        problems.append(f"{origin}: {value!r} — {error_message(err)}")
    # Errors in the base itself (not caused by an axis) are reported against the base's own path.
    spec = copy.deepcopy(base)
    for axis_path, values in axes.items():
        set_path(spec, axis_path, values[0])
    try:
        CELL_ADAPTER.validate_python(spec)
    except ValidationError as exc:
        for err in exc.errors():
            loc = error_location(err)
            if not any(loc == a or loc.startswith(a + ".") or a.startswith(loc + ".") for a in axes):
                top_keys = ("workload", "hosts", "network", *(("faults",) if top_faults else ()))
                top = re.split(r"[.\[]", loc)[0] in top_keys
                where_loc = loc if top else f"{where}.{loc}" if loc else where
                problems.append(f"{where_loc}: {error_input(err)}{error_message(err)}")
    return list(dict.fromkeys(_fault_named(p) for p in problems))


def _fault_named(problem: str) -> str:
    """`systems[0].faults: faults[1].action: …` → `systems[0].faults[1].action: …` (the message names the fault);
    a cell-wide check's `systems[0]: broker.leader: …` → `systems[0].broker.leader: …` likewise."""
    problem = re.sub(r"(^|\.)faults: faults\[", r"\1faults[", problem)
    return re.sub(r"^(systems\[\d+\]): broker\.leader: ", r"\1.broker.leader: ", problem)


def check_excludes(file: MatrixFile) -> list[str]:
    known = known_axes(file)
    return [
        f"exclude[{i}].{key}: not an axis of this matrix; axes are: {', '.join(sorted(known))}"
        for i, rule in enumerate(file.exclude)
        for key in rule
        if key not in known
    ]


def known_axes(file: MatrixFile) -> set[str]:
    known = {"version", "measurement", *file.axes}
    for block in file.systems:
        known |= set(block.axes)
    return known


def check_repeat_rules(file: MatrixFile) -> list[str]:
    if isinstance(file.repeats, int):
        return []
    known = known_axes(file)
    return [
        f"repeats[{i}].when.{key}: not an axis of this matrix; axes are: {', '.join(sorted(known))}"
        for i, rule in enumerate(file.repeats)
        for key in rule.when
        if key not in known
    ]
