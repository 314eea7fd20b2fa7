"""Pure measurement: schedules, percentiles, histograms, accounting and latency analysis, variation."""
