"""Clusters of nodes on this machine: node processes (cluster file, pids, placement,
supervisor, resizing) and the in-process cluster."""
