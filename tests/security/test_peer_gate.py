"""The peer port's admission rules: who may speak as which node, counted by reason."""

from __future__ import annotations

import pytest

from bhandar_cli.core.membership.gossip import GossipSyn
from bhandar_cli.core.membership.members import MemberState
from bhandar_cli.core.protocol.messages import Ping
from bhandar_cli.core.roles.streaming import StreamRequest
from bhandar_cli.security.peer_gate import PeerGate, PeerRefused


def refused(call: object, *args: object) -> str:
    with pytest.raises(PeerRefused) as caught:
        call(*args)  # type: ignore[operator]
    return caught.value.reason


def test_over_tls_a_hello_must_match_the_certificate() -> None:
    gate = PeerGate("A", tls=True)
    gate.admit_hello("B", "B", "127.0.0.1:1")
    assert refused(gate.admit_hello, "C", "B", "127.0.0.1:1") == "identity"
    assert refused(gate.admit_hello, "B", None, "127.0.0.1:1") == "no-certificate"
    assert gate.rejections["identity"] == 1 and gate.rejections["no-certificate"] == 1


def test_without_tls_there_is_no_certificate_to_check() -> None:
    PeerGate("A", tls=False).admit_hello("B", None, "127.0.0.1:1")


def test_a_message_naming_another_sender_is_refused_but_gossip_about_others_is_not() -> None:
    gate = PeerGate("A", tls=True)
    joiner = MemberState("C", "z1", (1,), "joining", 1, 1, "127.0.0.1:9")
    assert refused(gate.admit_message, "B", StreamRequest(1, joiner), "x") == "sender"
    gate.admit_message("C", StreamRequest(1, joiner), "x")
    gate.admit_message("B", GossipSyn((joiner,)), "x")  # B relays what it knows of C
    gate.admit_message("B", Ping(1), "x")
    assert gate.rejections["sender"] == 1


def test_a_decommissioned_node_is_not_heard_from_again() -> None:
    left = {"E"}
    gate = PeerGate("A", tls=True, decommissioned=lambda node: node in left)
    assert refused(gate.admit_hello, "E", "E", "x") == "decommissioned"
    assert refused(gate.admit_message, "E", Ping(1), "x") == "decommissioned"
    gate.admit_hello("B", "B", "x")
    assert gate.rejections["decommissioned"] == 2
