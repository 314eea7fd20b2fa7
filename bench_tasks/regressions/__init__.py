"""Regression detection over the published history: percentiles (issue 6) and capacities (issue 20).

`detect(lake_root)` reads `lake/history/percentiles/` and `lake/history/capacity/`, finds change points per
series with Apache Otava (or a baseline comparison for short histories) and returns a `RegressionResult`;
`write_results` stores it under `lake/regressions/`. Pure analysis in `detect.analyse`; reading and writing
stay at the edges (STYLE 11).
"""

from .detect import analyse, detect
from .model import Alert, ChangePoint, RegressionError, RegressionResult, Settings
from .output import write_results

__all__ = [
    "Alert",
    "ChangePoint",
    "RegressionError",
    "RegressionResult",
    "Settings",
    "analyse",
    "detect",
    "write_results",
]
