"""The trio runtime: nodes in one process over an in-memory network, or as processes over TCP."""
