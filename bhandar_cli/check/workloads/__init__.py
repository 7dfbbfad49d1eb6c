"""One module per workload of `bhandar check`: its operations, its answers and its checker."""
