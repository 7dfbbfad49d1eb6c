"""How a client request meets a host (host/executor.py): one request-id rule and one submit-then-wait.

The host runs every request under a ticket of its own, so two clients that chose the same `rid`
are each answered with their own result (the in-process cluster once passed the client's number
through, and the second request took the first one's answer). A request its client gave up on is
forgotten where it was submitted, whichever environment waited for it: no responder stays behind
(node processes once kept it, and counted the request in flight for a drain), yet the node's
metrics still count it when its answer goes out.
"""

from __future__ import annotations

import trio
import trio.testing

from bhandar_cli.core.model.records import Versioned
from bhandar_cli.core.model.versions import JSON
from bhandar_cli.core.protocol.client_messages import Failure, GetRequest, GetResult, PutRequest
from bhandar_cli.core.protocol.messages import Result
from bhandar_cli.host.executor import NodeHost
from bhandar_cli.node.runtime import call
from bhandar_cli.sim.sim_cluster import SimCluster
from tests.support.lone_host import lone_node_host


def lone_node() -> NodeHost:
    host = lone_node_host()
    host.start(0.0)
    return host


def run(host: NodeHost, now: float = 0.0) -> None:
    """Step the node until it has nothing left to do (a put's own ack comes back to it)."""
    for _ in range(10):
        if not host.ready(now):
            return
        host.step(now)
        while (sync := host.begin_sync()) is not None:
            sync.fsync()
            host.end_sync(sync)


def values(result: Result) -> list[bytes | None]:
    assert isinstance(result, GetResult) and isinstance(result.record, Versioned), result
    return [sibling.value for sibling in result.record.siblings]


def test_two_clients_that_chose_the_same_rid_are_each_answered_with_their_own_result() -> None:
    host = lone_node()
    for key, value in (("k1", b'"one"'), ("k2", b'"two"')):
        host.submit(PutRequest(1, "kv", key, value, JSON, None, "ONE"), lambda _result: None)
    run(host)
    first: list[Result] = []
    second: list[Result] = []
    tickets = {
        host.submit(GetRequest(7, "kv", "k1", "ONE"), first.append),
        host.submit(GetRequest(7, "kv", "k2", "ONE"), second.append),
    }
    run(host)
    assert [values(r) for r in first] == [[b'"one"']]
    assert [values(r) for r in second] == [[b'"two"']]
    assert len(tickets) == 2  # each ran under a ticket of the host's


def test_a_forgotten_request_is_never_answered_yet_the_node_counts_it() -> None:
    host = lone_node()
    answers: list[Result] = []
    ticket = host.submit(PutRequest(1, "kv", "k", b'"v"', JSON, None, "ONE"), answers.append)
    assert host.waiting == 1
    host.forget(ticket)
    assert host.waiting == 0
    run(host)
    assert answers == []
    assert host.metrics().ops[("put", "ONE")].ok == 1  # counted when the node's answer went out


def test_a_request_that_times_out_on_trio_is_forgotten_by_the_host() -> None:
    host = lone_node()  # nothing steps it: no answer ever comes

    async def main() -> Result:
        return await call(host.submit, host.forget, GetRequest(1, "kv", "k", "ONE"), 2.0, "A")

    result = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert isinstance(result, Failure) and result.code == "timeout", result
    assert str(result.error) == "no answer from A within 2 s"
    assert host.waiting == 0
    run(host)  # the node answers after all: nobody is told, and nothing is left behind
    assert host.waiting == 0 and host.metrics().ops[("get", "ONE")].count == 1


def test_a_request_that_times_out_in_the_simulator_is_forgotten_by_the_host() -> None:
    cluster = SimCluster(seed=5, nodes=3)
    cluster.run_for(1.0)
    # A cannot reach its peers, and does not know it yet: its write waits for acks that never come.
    cluster.model.partition([["A"], ["B", "C"]], cluster.members)
    put = PutRequest(cluster.new_rid(), "kv", "k", b'"v"', JSON, None, "ALL")
    result = cluster.call("A", put, timeout=0.2)
    assert isinstance(result, Failure) and result.code == "timeout", result
    assert result.error == "no answer from A within 0.2 s"
    assert cluster.hosts["A"].waiting == 0
    cluster.run_for(2.0)  # A's own timeout answers it: to nobody
    assert all(host.waiting == 0 for host in cluster.hosts.values())
