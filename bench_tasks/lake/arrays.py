"""Arrow columns of the raw tables built straight from numpy buffers.

`pa.array(...)` of anything asks pyarrow's pandas shim whether the object is a pandas one, and the first ask
imports pandas: 1.3-2 s of a small host's CPU in every worker process that writes samples, or in its fork server
ahead of the first cell. Columns made with `Array.from_buffers` never ask, so a worker never loads pandas.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa

INT64, INT32 = pa.int64(), pa.int32()


def ints(values: np.ndarray, kind: pa.DataType = INT64, null_below_zero: bool = False) -> pa.Array:
    """An integer column of `kind`; with `null_below_zero`, negative values (the logs' "none") are nulls."""
    data = np.ascontiguousarray(values, dtype=_numpy(kind))
    validity = _validity(values >= 0) if null_below_zero and (values < 0).any() else None
    return pa.Array.from_buffers(kind, data.size, [validity, pa.py_buffer(data)])


def filled(value: int, count: int, kind: pa.DataType = INT32) -> pa.Array:
    """`count` copies of `value` (a worker's own id on each of its rows)."""
    return ints(np.full(count, value, dtype=_numpy(kind)), kind)


def labels(codes: np.ndarray, names: Sequence[str]) -> pa.Array:
    """A string column whose row i is `names[codes[i]]` (the phase of each row)."""
    encoded = [name.encode() for name in names]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int32)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    dictionary = _strings(len(encoded), offsets, b"".join(encoded), None)
    indices = ints(codes, pa.int32())
    return pa.DictionaryArray.from_arrays(indices, dictionary).cast(pa.string())


def sparse_texts(texts: Mapping[int, str], count: int) -> pa.Array:
    """A string column of `count` rows, null but at the rows `texts` names (a producer's refusals)."""
    rows = sorted(texts)
    lengths = np.zeros(count, dtype=np.int64)
    encoded = [texts[row].encode() for row in rows]
    lengths[rows] = [len(e) for e in encoded]
    offsets = np.zeros(count + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    valid = np.zeros(count, dtype=bool)
    valid[rows] = True
    return _strings(count, offsets, b"".join(encoded), _validity(valid) if len(rows) < count else None)


def _numpy(kind: pa.DataType) -> np.dtype:
    """The numpy dtype of an Arrow integer type, from its width (Arrow's own mapping goes through pandas)."""
    return np.dtype(f"<i{kind.bit_width // 8}")


def _strings(count: int, offsets: np.ndarray, data: bytes, validity: pa.Buffer | None) -> pa.Array:
    return pa.Array.from_buffers(pa.string(), count, [validity, pa.py_buffer(offsets), pa.py_buffer(data)])


def _validity(valid: np.ndarray) -> pa.Buffer:
    """Arrow's validity bitmap (bit i set: row i holds a value), least significant bit first."""
    return pa.py_buffer(np.packbits(valid, bitorder="little"))
