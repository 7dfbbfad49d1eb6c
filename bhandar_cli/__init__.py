"""Bhandar: a Dynamo-style replicated key-value store you can run, break and watch."""

__version__ = "0.1.0"
