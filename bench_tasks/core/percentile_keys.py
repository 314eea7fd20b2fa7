"""The percentiles every table reports, apart from the code that computes them: the matrix's objectives are
checked against these keys when a matrix is read (at DAG parse time, where numpy must not load)."""

# Adding a percentile is a one-line change here (STYLE 4). Strings keep the decimals exact.
PERCENTILES: tuple[str, ...] = ("50", "90", "99", "99.9", "99.99", "99.999", "99.9999")
