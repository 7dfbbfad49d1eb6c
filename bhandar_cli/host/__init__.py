"""Hosting a core node: what the trio runtime and the simulator share (they differ only in the
environment they hand to `executor.NodeHost`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bhandar_cli import lazy_face

if TYPE_CHECKING:
    from bhandar_cli.host.executor import Call, Forget, NodeHost, PendingSync, Responder, Submit
    from bhandar_cli.host.network import (
        DISTRIBUTIONS,
        Distribution,
        LatencyModel,
        Network,
        NetworkModel,
        partition_groups,
    )
    from bhandar_cli.host.topology import next_node_name, node_names, zone_map

# The face: what other packages import from this one (tests/faces.txt pins it). Loaded on first
# use (PEP 562), so importing any module of the package costs no more than before.
__all__ = [
    "DISTRIBUTIONS",
    "Call",
    "Distribution",
    "Forget",
    "LatencyModel",
    "Network",
    "NetworkModel",
    "NodeHost",
    "PendingSync",
    "Responder",
    "Submit",
    "next_node_name",
    "node_names",
    "partition_groups",
    "zone_map",
]
if not TYPE_CHECKING:  # mypy reads the imports above: a misspelt name is an error
    __getattr__, __dir__ = lazy_face(
        __name__,
        {
            "Call": "executor",
            "DISTRIBUTIONS": "network",
            "Distribution": "network",
            "Forget": "executor",
            "LatencyModel": "network",
            "Network": "network",
            "NetworkModel": "network",
            "NodeHost": "executor",
            "PendingSync": "executor",
            "Responder": "executor",
            "Submit": "executor",
            "next_node_name": "topology",
            "node_names": "topology",
            "partition_groups": "network",
            "zone_map": "topology",
        },
    )
