"""Benchmarks, each beside a baseline measured in the same run."""
