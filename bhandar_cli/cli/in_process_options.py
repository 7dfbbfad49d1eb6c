"""The options that shape an in-process cluster, shared by `bhandar repl` and `bhandar web`:
declared once, with their checks (a bad value is one line and exit 2, before anything starts)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from bhandar_cli.cli.output import fail
from bhandar_cli.client import EXIT_USAGE

if TYPE_CHECKING:
    from bhandar_cli.client import ClusterOptions

NODES = typer.Option(5, "--nodes", "-n", help="Number of nodes (A, ..., Z, AA, AB, ...), 1 to 240.")
ZONES = typer.Option(3, "--zones", help="Zones z1, z2, ... assigned round-robin.")
VNODES = typer.Option(8, "--vnodes", help="Tokens (virtual nodes) per node.")
REPLICAS = typer.Option(3, "--replicas", help="Replication factor N of new keyspaces.")
SEED = typer.Option(0, "--seed", help="Seed of the network's latency randomness.")
DATA_DIR = typer.Option(
    None, "--data-dir", help="Keep the nodes' data in DIR between runs (default: a temporary directory)."
)


def cluster_options(
    nodes: int, zones: int, vnodes: int, replicas: int, seed: int, data_dir: Path | None, connect: Path | None
) -> ClusterOptions:
    """The checked options (exit 2 on a bad one); a --data-dir must hold the same node set, so no
    node is left in the ring with nobody running it."""
    from bhandar_cli.client import ClusterOptions
    from bhandar_cli.fleet import MAX_NODES

    if not 1 <= nodes <= MAX_NODES:
        fail(f"--nodes must be between 1 and {MAX_NODES} (got {nodes})", EXIT_USAGE)
    if not 1 <= zones <= nodes:
        fail(f"--zones must be between 1 and the number of nodes (got {zones})", EXIT_USAGE)
    if not 1 <= vnodes <= 1024:
        fail(f"--vnodes must be between 1 and 1024 (got {vnodes})", EXIT_USAGE)
    if not 1 <= replicas <= min(nodes, 9):
        fail(f"--replicas must be between 1 and min(nodes, 9) (got {replicas})", EXIT_USAGE)
    if data_dir is not None and connect is None:
        from bhandar_cli.fleet import node_set_mismatch

        wrong = node_set_mismatch(
            str(data_dir), nodes, str(data_dir), "start the first nodes with --nodes, then `add` the others"
        )
        if wrong:
            fail(wrong, EXIT_USAGE)
    return ClusterOptions(nodes, zones, vnodes, replicas, seed, str(data_dir) if data_dir else None)
