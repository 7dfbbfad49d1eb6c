"""Bhandar: a Dynamo-style replicated key-value store you can run, break and watch."""

__version__ = "0.1.0"

from bhandar_cli import native as _native

_native.choose()  # before any compiled module is imported: compiled, or pure Python (native.py)
