"""What a benchmark is, before anything runs: matrix files, cells and their ids, workloads, placement."""
