"""The metrics and bases of sample values, as the small ints the passes carry (named again in the tables)."""

BASES = ("intended", "sent")
METRICS = ("e2e", "publish", "rtt", "hop1", "hop2", "lag")  # codes are indexes; `lag` never reaches a table
E2E, PUBLISH, RTT, HOP1, HOP2, LAG = range(len(METRICS))
