"""A cell as the harness's state files keep it: the recorded cell (secrets redacted) anywhere, its secret
settings in a private file beside it.

The steps of a cell run in different processes (Airflow's provision, the detached generator, land, teardown)
and find the cell in a state file that the work folder, a reused cluster's entry or a `brokers up` record holds.
Such a file can be read, copied and shown; the secrets a matrix gave a broker or a client cannot. Each state
names the private file (`cell_secrets`, written by `secrecy.write_secret`) from which `cell_from` puts them back.
An Airflow task's arguments are shown in the UI too: a sweep hands each cell's provision task the recorded cell,
which takes its secrets back from its matrix file (`cell_from_matrix`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import CellError
from ..secrecy import REDACTED, merge_secrets, split_secrets, write_secret
from .matrix import load_matrix
from .matrix_model import Cell

SECRETS_NAME = "cell.json"


def cell_record(cell: Cell, secrets_dir: Path) -> dict[str, Any]:
    """`{"cell": …, "cell_secrets": …}` for a state: the recorded cell, and the private file of its secrets
    under `secrets_dir` (None when it has none)."""
    public, held = split_secrets(cell)
    path = write_secret(secrets_dir / SECRETS_NAME, json.dumps(held)) if held else None
    return {"cell": public, "cell_secrets": str(path) if path else None}


def cell_from(record: Mapping[str, Any]) -> Cell:
    """The cell a state recorded, its secrets put back from their private file. Once that file is gone (its
    folder removed with the brokers) the cell keeps its redacted values: enough to stop and clean up."""
    held: dict[str, Any] = {}
    path = record.get("cell_secrets")
    if path:
        try:
            held = json.loads(Path(path).read_text())
        except FileNotFoundError:
            held = {}
    return Cell.model_validate(merge_secrets(record["cell"], held))


def cell_from_matrix(recorded: Mapping[str, Any], source: str | None) -> Cell:
    """A cell handed on as recorded (an Airflow task's argument, which the UI shows), its secret settings read
    again from its matrix file `source`; the file is read only for a cell that had secrets redacted."""
    cell = Cell.model_validate(recorded)
    if source is None or REDACTED not in json.dumps(recorded):
        return cell
    for candidate in load_matrix(source).cells:
        if candidate.id == cell.id:
            return candidate.model_copy(update={"repeat": cell.repeat, "repeats": cell.repeats})
    raise CellError(cell.id, f"no longer in {source}: the matrix file changed after the DAG was parsed")
