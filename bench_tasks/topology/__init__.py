"""Where a cell's roles run: network namespaces, load-generator hosts, their clocks and their meeting point."""
