"""Why a write was forwarded travels in its result from protocol 6 on (core/wire.py `ADDED_IN`): an
older reader is written the result without it, and a result from an older node, without it,
decodes (the client then says less)."""

from __future__ import annotations

import pytest

from bhandar_cli.core.protocol.client_messages import IncrResult, PutResult
from bhandar_cli.core.protocol.messages import ClientReply
from bhandar_cli.core.wire import from_wire, to_wire, to_wire_at

REASON = "E is not a replica of kv/k (A, B, C): it forwarded to A"


@pytest.mark.parametrize(
    "result", [PutResult("A", 2, 2, forward_reason=REASON), IncrResult("A", 5, 2, 2, forward_reason=REASON)]
)
def test_a_result_carries_its_forward_reason_at_6_and_not_to_an_older_reader(
    result: PutResult | IncrResult,
) -> None:
    assert from_wire(to_wire_at(result, 6)) == result
    older = to_wire_at(result, 5)
    assert "forward_reason" not in older
    assert from_wire(older).forward_reason == ""


def test_a_result_from_an_older_node_without_the_field_decodes() -> None:
    # As a version-5 node writes it: no forward_reason at all.
    wire = {
        "$t": "PutResult",
        "coordinator": "A",
        "acks": 2,
        "needed": 2,
        "warnings": [],
        "hinted": [],
        "trace": [],
    }
    assert from_wire(wire) == PutResult("A", 2, 2)


def test_a_forwarded_result_relayed_between_nodes_is_stripped_for_an_older_peer() -> None:
    reply = ClientReply(7, PutResult("A", 2, 2, forward_reason=REASON))
    assert "forward_reason" not in to_wire_at(reply, 5)["result"]
    assert from_wire(to_wire(reply)) == reply
