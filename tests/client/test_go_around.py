"""The client goes around a node that failed a request when that is safe (client/data_client.py
`goes_around`): a write after a failure that promises nothing was written (the node not
listening, stopping, down or overloaded, or a coordinator with too few replicas), a read after any
failure of the cluster's; never a write whose outcome is unknown, and never the caller's fault.
The error of a request that failed everywhere says where it went."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from bhandar_cli.client.backends.blocking_backend import BlockingBackend, run_to_completion
from bhandar_cli.client.data_client import DataClient
from bhandar_cli.core.membership.ring import Ring, key_token
from bhandar_cli.core.model.errors import NOT_APPLIED, ClientError
from bhandar_cli.core.protocol.client_messages import (
    Failure,
    GetRequest,
    GetResult,
    IncrRequest,
    IncrResult,
    PutRequest,
    PutResult,
)
from bhandar_cli.core.session.client_session import REROUTES
from bhandar_cli.fleet.cluster_file import ClusterFile, NodeEntry

NAMES = ["A", "B", "C", "D", "E"]
KEY = ("kv", "k1")

# What a node says when it did not take a request: no coordinator ran it.
STOPPING = Failure("unavailable", "node X: shutting down: the request was not run")
REFUSED = Failure("unavailable", "node X is not answering at 127.0.0.1:1 (Connection refused)")
BUSY = Failure("unavailable", "too many requests in flight to node X; this one was not sent")
DOWN = Failure("unavailable", "node X is down; revive it or use another node")
# A coordinator's own verdicts.
TOO_FEW = Failure("unavailable", "1 of 3 replicas reachable, QUORUM needs 2", 1, 2, coordinator="X")
TIMED_OUT = Failure("timeout", "timed out after 1000 ms: 1 of 3 replicas answered", 1, 2, coordinator="X")
# Sent, then no answer: the node may have run it.
LOST = Failure("timeout", "connection to node X lost before it answered; the request may have taken effect")


class ScriptedBackend:
    """A `RequestBackend` whose nodes answer from a script: each node's next failures in order,
    then success."""

    def __init__(self, script: dict[str, list[Failure]], down: tuple[str, ...] = ()) -> None:
        self.names = list(NAMES)
        self.zones = dict.fromkeys(NAMES, "z1")
        self.ring = Ring.build(self.names, 8, self.zones)
        self.script = {node: list(failures) for node, failures in script.items()}
        self.down = set(down)
        self.asked: list[str] = []
        self._rid = 0

    def now(self) -> float:
        return 0.0

    def is_alive(self, name: str) -> bool:
        return name not in self.down

    def new_rid(self) -> int:
        self._rid += 1
        return self._rid

    def partitions(self) -> list[list[str]]:
        return []

    async def request(self, via: str, request: Any, timeout: float) -> Any:
        self.asked.append(via)
        failures = self.script.get(via)
        if failures:
            return failures.pop(0)
        if isinstance(request, GetRequest):
            return GetResult(via, None, 2, 2)
        if isinstance(request, IncrRequest):
            return IncrResult(via, request.delta, 2, 2)
        assert isinstance(request, PutRequest)
        return PutResult(via, 2, 2)


def walk(keyspace: str = KEY[0]) -> list[str]:
    """The key's nodes in the order the client tries them."""
    return list(Ring.build(NAMES, 8, dict.fromkeys(NAMES, "z1")).walk(key_token(keyspace, KEY[1])))


def put(backend: ScriptedBackend, via: str | None = None) -> Any:
    return run_to_completion(DataClient(backend).put(*KEY, b"1", "application/json", "none", via=via))


def incr(backend: ScriptedBackend) -> Any:
    return run_to_completion(DataClient(backend).incr("counters", KEY[1], 1, "req-7"))


def get(backend: ScriptedBackend) -> Any:
    return run_to_completion(DataClient(backend).get(*KEY))


@pytest.mark.parametrize(
    "failure", [STOPPING, REFUSED, BUSY, DOWN], ids=["stopping", "refused", "busy", "down"]
)
def test_a_write_a_node_did_not_take_goes_to_the_next_node(failure: Failure) -> None:
    first, second, *_ = walk()
    backend = ScriptedBackend({first: [failure]})
    outcome = put(backend)
    assert backend.asked == [first, second]
    assert outcome.coordinator == second


def test_an_increment_a_node_did_not_take_goes_to_the_next_node() -> None:
    nodes = walk("counters")
    backend = ScriptedBackend({nodes[0]: [STOPPING], nodes[1]: [REFUSED]})
    outcome = incr(backend)
    assert backend.asked == nodes[:3] and outcome.coordinator == nodes[2]
    assert outcome.request_id == "req-7"


@pytest.mark.parametrize("failure", [TIMED_OUT, LOST], ids=["coordinator timeout", "connection lost"])
def test_a_write_whose_outcome_is_unknown_is_not_sent_again(failure: Failure) -> None:
    first = walk()[0]
    backend = ScriptedBackend({first: [failure]})
    with pytest.raises(ClientError) as raised:
        put(backend)
    assert backend.asked == [first]
    assert raised.value.code == "timeout" and "asked first" not in str(raised.value)


@pytest.mark.parametrize("failure", [TIMED_OUT, LOST], ids=["coordinator timeout", "connection lost"])
def test_an_increment_whose_outcome_is_unknown_is_not_sent_again_and_says_how_to_retry(
    failure: Failure,
) -> None:
    first = walk("counters")[0]
    backend = ScriptedBackend({first: [failure]})
    with pytest.raises(ClientError) as raised:
        incr(backend)
    assert backend.asked == [first]  # a second coordinator could count it twice
    said = str(raised.value)
    assert raised.value.code == "timeout" and said.startswith(failure.error)
    assert "may have been applied: retry it with request id req-7 and it counts once" in said


def test_an_increment_not_applied_anywhere_does_not_claim_it_may_have_been() -> None:
    nodes = walk("counters")
    backend = ScriptedBackend({node: [STOPPING] for node in nodes})
    with pytest.raises(ClientError) as raised:
        incr(backend)
    assert raised.value.code in NOT_APPLIED and "may have been applied" not in str(raised.value)


@pytest.mark.parametrize(
    "failure", [TIMED_OUT, LOST, STOPPING, TOO_FEW], ids=["timeout", "lost", "stopping", "too few"]
)
def test_a_read_goes_around_any_failure_of_the_cluster(failure: Failure) -> None:
    first, second, *_ = walk()
    backend = ScriptedBackend({first: [failure]})
    assert get(backend).coordinator == second
    assert backend.asked == [first, second]


@pytest.mark.parametrize(
    "code", ["bad_input", "too_large", "unknown_keyspace", "unauthenticated", "forbidden", "rate_limited"]
)
def test_the_callers_fault_is_not_sent_elsewhere(code: str) -> None:
    first = walk()[0]
    for request in (put, get):
        backend = ScriptedBackend({first: [Failure(code, f"{code} here")]})
        with pytest.raises(ClientError) as raised:
            request(backend)
        assert backend.asked == [first] and raised.value.code == code


def test_a_node_named_by_the_user_is_the_only_one_asked() -> None:
    backend = ScriptedBackend({"C": [STOPPING]})
    with pytest.raises(ClientError) as raised:
        put(backend, via="C")
    assert backend.asked == ["C"] and raised.value.code == "unavailable"


def test_a_request_goes_around_at_most_reroutes_nodes_and_its_error_names_each() -> None:
    nodes = walk()
    said_by = {
        node: Failure("unavailable", f"node {node}: shutting down: the request was not run") for node in nodes
    }
    backend = ScriptedBackend({node: [failure] for node, failure in said_by.items()})
    with pytest.raises(ClientError) as raised:
        put(backend)
    assert backend.asked == nodes[: REROUTES + 1]
    first, second, last = (said_by[node].error for node in nodes[: REROUTES + 1])
    assert str(raised.value) == f"{last} (asked first: {nodes[0]}: {first}; {nodes[1]}: {second})"


def test_a_node_believed_down_is_skipped() -> None:
    first, second, third, *_ = walk()
    backend = ScriptedBackend({first: [STOPPING]}, down=(second,))
    assert put(backend).coordinator == third
    assert backend.asked == [first, third]


def test_a_coordinators_verdict_is_asked_of_one_more_coordinator_only() -> None:
    nodes = walk()
    backend = ScriptedBackend({node: [TOO_FEW] for node in nodes})
    with pytest.raises(ClientError) as raised:
        put(backend)
    assert backend.asked == nodes[:2]  # an outage does not cost every node a request per request
    assert raised.value.code == "unavailable" and (raised.value.answered, raised.value.needed) == (1, 2)
    assert str(raised.value) == f"{TOO_FEW.error} (asked first: {nodes[0]}, which said the same)"


def test_after_a_node_that_did_not_take_it_a_coordinator_is_still_asked_twice() -> None:
    nodes = walk()
    backend = ScriptedBackend({nodes[0]: [STOPPING], nodes[1]: [TOO_FEW]})
    assert put(backend).coordinator == nodes[2]
    assert backend.asked == nodes[:3]


def test_the_one_shot_backend_goes_around_nodes_that_refuse_the_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A one-shot command's backend (blocking sockets): every node's port refuses, so the put goes
    to REROUTES + 1 nodes, each named in the error as not answering, and not run anywhere."""
    # Every node's process runs, as far as the client knows (as when they are restarting).
    monkeypatch.setattr("bhandar_cli.client.backends.blocking_backend.pid_alive", lambda pid: True)
    ports = []
    for _ in NAMES:  # ports nobody listens on: bound, then closed
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            ports.append(sock.getsockname()[1])
    entries = tuple(
        NodeEntry(n, "z1", "127.0.0.1", port, 0, "", "", pid=1) for n, port in zip(NAMES, ports, strict=True)
    )
    backend = BlockingBackend(ClusterFile(dir="/nonexistent", nodes=entries))
    with pytest.raises(ClientError) as raised:
        run_to_completion(DataClient(backend).put(*KEY, b"1", "application/json", "none"))
    said = str(raised.value)
    assert raised.value.code in NOT_APPLIED, said
    asked = walk()[: REROUTES + 1]
    assert said.count("is not answering") == REROUTES + 1, said
    assert all(f"node {n} is not answering" in said for n in asked), said
