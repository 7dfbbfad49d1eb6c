"""What a node does: coordinate, read, write, hold replicas and hints, hand off, stream."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bhandar_cli import lazy_face

if TYPE_CHECKING:
    from bhandar_cli.core.roles.coordinator import Coordinator
    from bhandar_cli.core.roles.dot_lease import DotLease
    from bhandar_cli.core.roles.exact_dots import ExactDots
    from bhandar_cli.core.roles.expiry import ExpirySweeper
    from bhandar_cli.core.roles.handoff import HintedHandoff
    from bhandar_cli.core.roles.hints import HintQueue
    from bhandar_cli.core.roles.hot_keys import SHOWN, HotSketches
    from bhandar_cli.core.roles.ownership import OwnershipHandoff
    from bhandar_cli.core.roles.read_path import ReadCoordinator
    from bhandar_cli.core.roles.replica import Replica
    from bhandar_cli.core.roles.role_context import RoleContext
    from bhandar_cli.core.roles.streaming import StreamAck, StreamBatch, Streaming, StreamRequest, StreamsView
    from bhandar_cli.core.roles.write_path import WriteCoordinator

# The face: what other packages import from this one (tests/faces.txt pins it). Loaded on first
# use (PEP 562), so importing any module of the package costs no more than before.
__all__ = [
    "SHOWN",
    "Coordinator",
    "DotLease",
    "ExactDots",
    "ExpirySweeper",
    "HintQueue",
    "HintedHandoff",
    "HotSketches",
    "OwnershipHandoff",
    "ReadCoordinator",
    "Replica",
    "RoleContext",
    "StreamAck",
    "StreamBatch",
    "StreamRequest",
    "Streaming",
    "StreamsView",
    "WriteCoordinator",
]
if not TYPE_CHECKING:  # mypy reads the imports above: a misspelt name is an error
    __getattr__, __dir__ = lazy_face(
        __name__,
        {
            "Coordinator": "coordinator",
            "DotLease": "dot_lease",
            "ExactDots": "exact_dots",
            "ExpirySweeper": "expiry",
            "HintQueue": "hints",
            "HintedHandoff": "handoff",
            "HotSketches": "hot_keys",
            "OwnershipHandoff": "ownership",
            "ReadCoordinator": "read_path",
            "Replica": "replica",
            "RoleContext": "role_context",
            "SHOWN": "hot_keys",
            "StreamAck": "streaming",
            "StreamBatch": "streaming",
            "StreamRequest": "streaming",
            "Streaming": "streaming",
            "StreamsView": "streaming",
            "WriteCoordinator": "write_path",
        },
    )
