"""Chaos runs: a seeded workload under faults against a simulated cluster, then the checker."""
