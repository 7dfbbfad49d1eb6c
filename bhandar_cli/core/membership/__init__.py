"""Who is in the cluster and who is up: the ring, gossip, failure detection."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bhandar_cli import lazy_face

if TYPE_CHECKING:
    from bhandar_cli.core.membership.authorship import (
        TRUST_ALL,
        Authorship,
        Removal,
        member_content,
        removal_content,
    )
    from bhandar_cli.core.membership.gossip import (
        Goodbye,
        GossipAck,
        GossipLiveness,
        GossipSyn,
        GossipTokens,
    )
    from bhandar_cli.core.membership.liveness import Liveness, PingLiveness
    from bhandar_cli.core.membership.member_row import MemberRow
    from bhandar_cli.core.membership.members import CODES, MemberState
    from bhandar_cli.core.membership.node_membership import MembershipSaver, boot_gossip
    from bhandar_cli.core.membership.ring import Ring, key_token, moved_keys, node_tokens
    from bhandar_cli.core.membership.ringview import RingView

# The face: what other packages import from this one (tests/faces.txt pins it). Loaded on first
# use (PEP 562), so importing any module of the package costs no more than before.
__all__ = [
    "CODES",
    "TRUST_ALL",
    "Authorship",
    "Goodbye",
    "GossipAck",
    "GossipLiveness",
    "GossipSyn",
    "GossipTokens",
    "Liveness",
    "MemberRow",
    "MemberState",
    "MembershipSaver",
    "PingLiveness",
    "Removal",
    "Ring",
    "RingView",
    "boot_gossip",
    "key_token",
    "member_content",
    "moved_keys",
    "node_tokens",
    "removal_content",
]
if not TYPE_CHECKING:  # mypy reads the imports above: a misspelt name is an error
    __getattr__, __dir__ = lazy_face(
        __name__,
        {
            "Authorship": "authorship",
            "CODES": "members",
            "Goodbye": "gossip",
            "GossipAck": "gossip",
            "GossipLiveness": "gossip",
            "GossipSyn": "gossip",
            "GossipTokens": "gossip",
            "Liveness": "liveness",
            "MemberRow": "member_row",
            "MemberState": "members",
            "MembershipSaver": "node_membership",
            "PingLiveness": "liveness",
            "Removal": "authorship",
            "Ring": "ring",
            "RingView": "ringview",
            "TRUST_ALL": "authorship",
            "boot_gossip": "node_membership",
            "key_token": "ring",
            "member_content": "authorship",
            "moved_keys": "ring",
            "node_tokens": "ring",
            "removal_content": "authorship",
        },
    )
