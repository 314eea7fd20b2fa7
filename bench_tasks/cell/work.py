"""A cell's work folder (`CellWork`): the files through which its detached steps (provision, the generator, the
phase watchers, land, teardown) find each other, whichever process or Airflow task runs each."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import CellError
from ..spec.kept import cell_from
from ..spec.matrix_model import Cell

BROKER_POLICIES = ("fresh", "reuse")
PHASES = ("warmup", "measure", "cooldown")


@dataclass(frozen=True)
class CellWork:
    """The per-cell folder through which detached steps find each other."""

    root: Path

    @property
    def state(self) -> Path:
        return self.root / "state.json"

    @property
    def generator(self) -> Path:
        return self.root / "generator.json"

    @property
    def status(self) -> Path:
        return self.root / "status.json"

    @property
    def cellrun(self) -> Path:
        return self.root / "cellrun.json"

    @property
    def landed(self) -> Path:
        return self.root / "landed.json"

    @property
    def log(self) -> Path:
        return self.root / "generator.log"

    @property
    def brokers_dir(self) -> Path:
        return self.root / "brokers"

    def verdict(self, phase: str) -> Path:
        return self.root / f"verdict-{phase}.json"

    def read(self, path: Path) -> dict[str, Any] | None:
        """A JSON file of this folder, or None if it does not exist (yet)."""
        try:
            return json.loads(path.read_text())
        except FileNotFoundError:
            return None

    def cell(self) -> Cell:
        state = self.read(self.state)
        if state is None:
            raise CellError("?", f"no provisioned cell in {self.root}")
        return cell_from(state)

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""
