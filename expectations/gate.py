"""Run a suite against a frame in an ephemeral GX context and keep what a reader needs from the result."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import great_expectations as gx
from great_expectations.data_context.types.base import ProgressBarsConfig


@dataclass
class SuiteOutcome:
    """One suite's verdict: `failed` names each failed expectation with what it saw."""

    suite: str
    success: bool
    evaluated: int
    failed: list[str]
    result: dict[str, Any]


def _describe(res: Any) -> str:
    config = res.expectation_config
    kwargs = {k: v for k, v in config.kwargs.items() if k not in ("batch_id",) and v is not None}
    seen = res.result or {}
    facts = {k: seen[k] for k in ("observed_value", "unexpected_count", "partial_unexpected_list") if k in seen}
    if res.exception_info and res.exception_info.get("raised_exception"):
        facts["exception"] = res.exception_info.get("exception_message")
    return f"{config.type}({json.dumps(kwargs, default=str)}): {json.dumps(facts, default=str)}"


def validate(frame: Any, suite: gx.ExpectationSuite) -> SuiteOutcome:
    """Validate a Spark or pandas DataFrame; an expectation that raised counts as failed."""
    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)  # a bar per metric batch: noise in a task log
    is_spark = type(frame).__module__.startswith("pyspark")
    source = context.data_sources.add_spark("frames") if is_spark else context.data_sources.add_pandas("frames")
    batch_definition = source.add_dataframe_asset(suite.name).add_batch_definition_whole_dataframe("whole")
    suite = context.suites.add(suite)
    result = batch_definition.get_batch(batch_parameters={"dataframe": frame}).validate(suite, result_format="SUMMARY")
    failed = [_describe(r) for r in result.results if not r.success]
    return SuiteOutcome(
        suite=suite.name,
        success=bool(result.success) and not failed,
        evaluated=len(result.results),
        failed=failed,
        result=json.loads(json.dumps(result.to_json_dict(), default=str)),
    )
