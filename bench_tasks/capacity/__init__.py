"""Capacity at a latency objective: the highest offered rate a cell holds, found by running it at rising rates."""
