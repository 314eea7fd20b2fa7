"""Where a cell's roles run: network namespaces, load-generator hosts, their clocks and their meeting point."""

HOSTS_TIMEOUT_S = 300.0  # a cell split over hosts: how long one host waits for the others' generate tasks
