"""Clusters of nodes on this machine: node processes (cluster file, pids, placement,
supervisor, resizing) and the in-process cluster."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bhandar_cli import lazy_face

if TYPE_CHECKING:
    from bhandar_cli.fleet.cluster_data import node_set_mismatch, retire_node_dir
    from bhandar_cli.fleet.cluster_file import (
        ClusterFile,
        ClusterFileError,
        NodeEntry,
        client_access,
        load,
        path_of,
        resolve_dir,
        save,
    )
    from bhandar_cli.fleet.cluster_secrets import cluster_key, node_tls_dir
    from bhandar_cli.fleet.in_process_cluster import MAX_NODES, InProcessCluster
    from bhandar_cli.fleet.node_logs import with_last_words
    from bhandar_cli.fleet.pids import load_running, pid_alive
    from bhandar_cli.fleet.placement import free_ports, parse_hosts, parse_issuers
    from bhandar_cli.fleet.resize import add_node, names_taken, next_free_name, retire_node
    from bhandar_cli.fleet.supervisor import (
        STILL_RUNNING,
        STOP_TIMEOUT,
        StartError,
        down,
        kill_process,
        running_cluster,
        set_faults,
        start,
        start_many,
        stop,
        up,
        wait_exit,
    )

# The face: what other packages import from this one (tests/faces.txt pins it). Loaded on first
# use (PEP 562), so importing any module of the package costs no more than before.
__all__ = [
    "MAX_NODES",
    "STILL_RUNNING",
    "STOP_TIMEOUT",
    "ClusterFile",
    "ClusterFileError",
    "InProcessCluster",
    "NodeEntry",
    "StartError",
    "add_node",
    "client_access",
    "cluster_key",
    "down",
    "free_ports",
    "kill_process",
    "load",
    "load_running",
    "names_taken",
    "next_free_name",
    "node_set_mismatch",
    "node_tls_dir",
    "parse_hosts",
    "parse_issuers",
    "path_of",
    "pid_alive",
    "resolve_dir",
    "retire_node",
    "retire_node_dir",
    "running_cluster",
    "save",
    "set_faults",
    "start",
    "start_many",
    "stop",
    "up",
    "wait_exit",
    "with_last_words",
]
if not TYPE_CHECKING:  # mypy reads the imports above: a misspelt name is an error
    __getattr__, __dir__ = lazy_face(
        __name__,
        {
            "ClusterFile": "cluster_file",
            "ClusterFileError": "cluster_file",
            "InProcessCluster": "in_process_cluster",
            "MAX_NODES": "in_process_cluster",
            "NodeEntry": "cluster_file",
            "STILL_RUNNING": "supervisor",
            "STOP_TIMEOUT": "supervisor",
            "StartError": "supervisor",
            "add_node": "resize",
            "client_access": "cluster_file",
            "cluster_key": "cluster_secrets",
            "down": "supervisor",
            "free_ports": "placement",
            "kill_process": "supervisor",
            "load": "cluster_file",
            "load_running": "pids",
            "names_taken": "resize",
            "next_free_name": "resize",
            "node_set_mismatch": "cluster_data",
            "node_tls_dir": "cluster_secrets",
            "parse_hosts": "placement",
            "parse_issuers": "placement",
            "path_of": "cluster_file",
            "pid_alive": "pids",
            "resolve_dir": "cluster_file",
            "retire_node": "resize",
            "retire_node_dir": "cluster_data",
            "running_cluster": "supervisor",
            "save": "cluster_file",
            "set_faults": "supervisor",
            "start": "supervisor",
            "start_many": "supervisor",
            "stop": "supervisor",
            "up": "supervisor",
            "wait_exit": "supervisor",
            "with_last_words": "node_logs",
        },
    )
