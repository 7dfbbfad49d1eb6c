"""Typer sub-apps of the `bhandar` command line, one module per command group."""
