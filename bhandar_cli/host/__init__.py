"""Hosting a core node: what the trio runtime and the simulator share (they differ only in the
environment they hand to `executor.NodeHost`)."""
