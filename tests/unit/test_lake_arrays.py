"""Arrow columns from numpy buffers (`lake.arrays`): equal to what `pa.array` builds, and never loading pandas."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa

from bench_tasks.lake import arrays


def test_integer_columns_equal_pa_array_with_negative_values_null() -> None:
    values = np.array([5, -1, 7, -1, 0], dtype=np.int64)
    assert arrays.ints(values, null_below_zero=True).equals(pa.array(values, mask=values < 0))
    assert arrays.ints(values).equals(pa.array(values))
    assert arrays.ints(values, pa.int32(), null_below_zero=True).equals(
        pa.array(values.astype(np.int32), pa.int32(), mask=values < 0)
    )
    assert arrays.filled(3, 4).equals(pa.array([3, 3, 3, 3], pa.int32()))


def test_string_columns_equal_pa_array() -> None:
    names = ("warmup", "measure", "cooldown")
    codes = np.array([0, 1, 1, 2, 0])
    assert arrays.labels(codes, names).equals(pa.array([names[c] for c in codes], pa.string()))
    assert arrays.labels(np.array([], dtype=np.int64), names).equals(pa.array([], pa.string()))
    texts = {1: "refused: queue full", 4: "délai dépassé"}
    assert arrays.sparse_texts(texts, 6).equals(pa.array([texts.get(i) for i in range(6)], pa.string()))
    assert arrays.sparse_texts({}, 3).equals(pa.array([None] * 3, pa.string()))


def test_a_worker_writes_its_samples_without_loading_pandas(tmp_path) -> None:
    """A worker's modules (the generator, every driver) and both sample tables written to Parquet, in a fresh
    interpreter: pandas is never imported (it cost every worker 1.3-2 s of start-up)."""
    probe = textwrap.dedent(f"""
        import sys
        import numpy as np
        from bench_tasks.cell.workerctx import PRELOAD
        from bench_tasks.core.schedule import PhasePlan
        from bench_tasks.lake.records import write_parquet_parts, RECEIVED_SCHEMA
        from bench_tasks.load import rawfiles
        import importlib
        drivers = importlib.import_module(PRELOAD).DRIVERS
        assert len(drivers) >= 6, drivers
        plan = PhasePlan(0, 10, 20, 30)
        cols = {{name: np.arange(4, dtype=np.int64) - 1 for name in rawfiles.RECEIVED_COLUMNS}}
        table = rawfiles.received_table(cols, 0, plan)
        write_parquet_parts(RECEIVED_SCHEMA, [table], __import__("pathlib").Path({str(tmp_path / "r.parquet")!r}))
        sent = rawfiles.sent_table({{n: np.arange(4) for n in rawfiles.SENT_COLUMNS}}, 0, plan, {{2: "refused"}})
        print("pandas" in sys.modules, table.num_rows, sent.num_rows)
    """)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "4", "4"]
