"""A/B comparison: pairing by axis, refusal naming the differing fields, ratios B/A."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from spark_jobs import CompareError
from spark_jobs.compare import COMPARE_SCHEMA, check_comparable, compare_table, pair_cells

CORE = {"system": "nats", "version": "2.15.1", "broker": {"mode": "core"}, "workload": {"rate_per_s": 1000}}


def _spec(**changes: object) -> dict:
    spec = json.loads(json.dumps(CORE))
    for path, value in changes.items():
        *parents, leaf = path.split("__")
        node = spec
        for p in parents:
            node = node[p]
        node[leaf] = value
    return spec


def test_refuses_pairs_that_differ_outside_the_axis() -> None:
    check_comparable(CORE, _spec(version="2.12.8"), "version")
    with pytest.raises(CompareError, match=r"also differ in broker\.mode, workload\.rate_per_s"):
        check_comparable(CORE, _spec(version="2.12.8", broker__mode="jetstream", workload__rate_per_s=5000), "version")
    with pytest.raises(CompareError, match="also differ in version"):
        check_comparable(CORE, _spec(version="2.12.8"), "run")


def test_pairs_cells_along_an_axis() -> None:
    a = [
        {"cell_id": "a1", "spec_json": json.dumps(CORE)},
        {"cell_id": "a2", "spec_json": json.dumps(_spec(workload__rate_per_s=5))},
    ]
    b = [
        {"cell_id": "b1", "spec_json": json.dumps(_spec(broker__mode="jetstream"))},
        {"cell_id": "b2", "spec_json": json.dumps(CORE)},
    ]
    assert pair_cells(a, b, "broker.mode") == [("a1", "b1")]
    assert pair_cells(a, b, "run") == [("a1", "b2")]
    assert pair_cells(a, b, "version") == []


def test_ratio_per_statistic() -> None:
    percentiles = ("p50_ns", "p90_ns", "p99_ns", "p99_9_ns", "p99_99_ns", "p99_999_ns", "p99_9999_ns", "max_ns")
    columns = ["run_id", "cell_id", "label", "count", "metric", "basis", "leader", *percentiles]
    pct_a = pd.DataFrame(
        [("A", "a1", "core", 200, "e2e", "intended", None, 100, 200, 400, *[None] * 4, 800)], columns=columns
    )
    pct_b = pd.DataFrame(
        [("B", "b1", "js", 200, "e2e", "intended", None, 150, 200, 1000, *[None] * 4, 400)], columns=columns
    )
    pairs = pd.DataFrame([("a1", "b1", ["host.kernel"])], columns=["cell_a", "cell_b", "context_differs"])
    table = compare_table(pct_a, pct_b, pairs, "broker.mode")
    assert table.schema == COMPARE_SCHEMA
    rows = {r["statistic"]: r for r in table.to_pylist()}
    assert (rows["p50"]["ratio"], rows["p99"]["ratio"], rows["max"]["ratio"]) == (1.5, 2.5, 0.5)
    assert rows["p99.9"]["ratio"] is None and rows["p99.9"]["a_ns"] is None  # unsupported stays unsupported
    assert rows["max"]["context_differs"] == ["host.kernel"] and rows["max"]["leader"] is None
    assert (rows["max"]["run_a"], rows["max"]["label_b"], rows["max"]["axis"]) == ("A", "js", "broker.mode")
