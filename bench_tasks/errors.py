"""One exception type per subsystem, so the CLI can map each to a precise message and exit code.

Nothing here prints; the CLI decides how an error reaches the user (STYLE 13).
"""

from __future__ import annotations


class SixninesError(Exception):
    """Base of every error the harness raises on purpose. `exit_code` is what the CLI exits with."""

    exit_code = 1


class MatrixError(SixninesError):
    """A matrix file (or a cell built from one) is invalid. Exit code 2: the input is wrong, not the run."""

    exit_code = 2

    def __init__(self, source: str, problems: list[str]):
        self.source = source
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"{source}: invalid matrix\n{lines}")


class ObjectiveError(SixninesError):
    """A latency objective (`--slo`, `capacity.objectives`) cannot be read. Exit code 2: the input is wrong."""

    exit_code = 2


class BrokerError(SixninesError):
    """A broker could not be fetched, started, reached or stopped."""


class RoutesNotDeleted(BrokerError):
    """Some of a cell's routes (queues, topics, streams) were not deleted. `deleted` names those the broker
    confirmed deleted and `failed` each one it did not, with why: teardown records both (a route left behind on
    an external broker is the operator's to remove), never a deletion the broker did not confirm."""

    def __init__(self, where: str, deleted: list[str], failed: dict[str, str]):
        self.deleted = deleted
        self.failed = failed
        reasons = "; ".join(f"{name!r}: {why}" for name, why in failed.items())
        super().__init__(f"{where}: {len(failed)} route(s) not deleted: {reasons}")


class PayloadError(SixninesError):
    """A received message does not carry a sixnines header (wrong magic, version or length)."""


class CellError(SixninesError):
    """A cell failed. The message always names the cell id and the reason."""

    def __init__(self, cell_id: str, reason: str):
        self.cell_id = cell_id
        self.reason = reason
        super().__init__(f"cell {cell_id} failed: {reason}")


class NativeToolError(SixninesError):
    """A system's own benchmark tool (the NATS CLI, Kafka's perf tools) could not be built, run, or read."""


class NetworkError(SixninesError):
    """Network namespaces, links or bandwidth caps for load-generator hosts could not be set up or removed."""


class InteropError(SixninesError):
    """A file of another tool (an OpenMessaging Benchmark workload or driver) cannot be imported, or a run
    cannot be exported as asked. Exit code 2: the input is wrong. Each problem names the file and the field."""

    exit_code = 2

    def __init__(self, source: str, problems: list[str]):
        self.source = source
        self.problems = problems
        lines = [p if p.startswith(f"{source}:") else f"{source}: {p}" for p in problems]
        listed = "\n".join(f"  - {line}" for line in lines)
        super().__init__(lines[0] if len(lines) == 1 else f"{source}: {len(lines)} problems\n{listed}")


class SecretsError(SixninesError):
    """Secret settings cannot reach where they are needed (no shared key to seal them for another host)."""
