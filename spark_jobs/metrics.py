"""The metrics and bases of sample values, as the small ints the passes carry (named again in the tables)."""

import numpy as np
import pandas as pd

BASES = ("intended", "sent")
METRICS = ("e2e", "publish", "rtt", "hop1", "hop2", "lag")  # codes are indexes; `lag` never reaches a table
E2E, PUBLISH, RTT, HOP1, HOP2, LAG = range(len(METRICS))


def metric_names(codes: pd.Series) -> np.ndarray:
    """The tables' names of metric codes (as the tables built on the driver name them)."""
    return np.asarray(METRICS, dtype=object)[codes.to_numpy(np.int64)]


def basis_names(codes: pd.Series) -> np.ndarray:
    return np.asarray(BASES, dtype=object)[codes.to_numpy(np.int64)]
