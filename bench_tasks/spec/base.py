"""What every settings model shares: strictness (unknown keys are errors, values frozen once validated) and
the smallest message the harness can send."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from ..core.header import HEADER_SIZE


class StrictModel(BaseModel):
    """Unknown keys are errors, and models are immutable once validated."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def _holds_header(value: int) -> int:
    if value < HEADER_SIZE:
        raise ValueError(f"must be at least the {HEADER_SIZE}-byte payload header")
    return value


# Every sixnines message carries the payload header, so no workload may ask for a smaller one.
MessageSizeBytes = Annotated[int, Field(gt=0), AfterValidator(_holds_header)]
