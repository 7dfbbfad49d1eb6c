"""The client session driven directly, as a state machine: what it sends where for each result it
is handed (core/session/client_session.py). No cluster, no backend, no clock: a ring, a set of
nodes that are down, and the results the test chooses."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from bhandar_cli.core.membership.ring import Ring, key_token
from bhandar_cli.core.model.context import BLIND_DELETE_WARNING, encode_context
from bhandar_cli.core.model.records import Versioned
from bhandar_cli.core.model.versions import Sibling
from bhandar_cli.core.protocol.client_messages import (
    Failure,
    GetRequest,
    GetResult,
    IncrRequest,
    IncrResult,
    PutRequest,
    PutResult,
)
from bhandar_cli.core.session.client_session import (
    EVERY_NODE_DOWN,
    REROUTES,
    ClientSession,
    Done,
    Failed,
    SendRequest,
)

NAMES = ["A", "B", "C", "D", "E"]
KS, KEY = "kv", "k1"

NOT_LISTENING = Failure("unreachable", "node X is not answering (Connection refused)")
TOO_FEW = Failure("unavailable", "1 of 3 replicas reachable, QUORUM needs 2", 1, 2, coordinator="X")
LOST = Failure("timeout", "connection lost before it answered; the request may have taken effect")
BAD = Failure("bad_input", "the key is too long")


@dataclass
class View:
    """A `ClusterView`: a fixed ring and the nodes that are down."""

    ring: Ring = field(default_factory=lambda: Ring.build(NAMES, 8, dict.fromkeys(NAMES, "z1")))
    down: set[str] = field(default_factory=set)

    def is_alive(self, name: str) -> bool:
        return name not in self.down


def walk(view: View) -> list[str]:
    return list(view.ring.walk(key_token(KS, KEY)))


def session() -> ClientSession:
    counter = iter(range(1, 1000))
    return ClientSession(lambda: next(counter))


def found(*clocks: dict[str, int], values: tuple[bytes | None, ...] = ()) -> GetResult:
    """A read that found one sibling per clock (its dot the clock's largest entry)."""
    siblings = []
    for i, clock in enumerate(clocks):
        actor = max(clock, key=lambda a: clock[a])
        context = {a: c for a, c in clock.items() if a != actor}
        value = values[i] if i < len(values) else b'"v%d"' % i
        siblings.append(Sibling((actor, clock[actor]), context, value))
    return GetResult("A", Versioned(tuple(siblings)), 2, 2)


def send(step: object) -> SendRequest:
    assert isinstance(step, SendRequest), step
    return step


def test_a_request_goes_to_the_first_live_replica_of_its_key() -> None:
    view = View()
    first = walk(view)[0]
    assert send(session().get(KS, KEY, level="QUORUM").start(view)).node == first
    view.down = {first}
    assert send(session().get(KS, KEY, level="QUORUM").start(view)).node == walk(view)[1]


def test_with_every_node_down_the_operation_fails_at_once_unavailable() -> None:
    step = session().put(KS, KEY, b"1", "", level="ONE").start(View(down=set(NAMES)))
    assert isinstance(step, Failed) and step.failure == EVERY_NODE_DOWN
    assert step.error().code == "unavailable"


def test_a_named_node_is_asked_even_when_it_is_not_a_replica_and_never_gone_around() -> None:
    view = View()
    outsider = walk(view)[-1]
    exchange = session().put(KS, KEY, b"1", "", level="ONE", via=outsider)
    assert send(exchange.start(view)).node == outsider
    assert isinstance(exchange.receive(NOT_LISTENING, view), Failed)


def test_a_read_remembers_its_context_and_the_next_put_carries_it() -> None:
    view, s = View(), session()
    get = s.get(KS, KEY, level="QUORUM")
    send(get.start(view))
    done = get.receive(found({"A": 2}, {"B": 1, "A": 1}), view)
    assert isinstance(done, Done) and s.context(KS, KEY) == {"A": 2, "B": 1}
    put = s.put(KS, KEY, b"2", "application/json", level="QUORUM")
    request = send(put.start(view)).request
    assert isinstance(request, PutRequest) and request.context == {"A": 2, "B": 1}
    assert put.context_used == "auto"


def test_a_put_without_a_remembered_context_is_blind_and_none_is_blind_on_purpose() -> None:
    view, s = View(), session()
    never_read = s.put(KS, KEY, b"1", "", level="ONE")
    assert send(never_read.start(view)).request == PutRequest(1, KS, KEY, b"1", "", None, "ONE")
    assert never_read.context_used == "none"
    get = s.get(KS, KEY, level="ONE")
    get.start(view)
    get.receive(found({"A": 1}), view)
    blind = s.put(KS, KEY, b"2", "", context="none", level="ONE")
    request = send(blind.start(view)).request
    assert isinstance(request, PutRequest) and request.context is None and blind.context_used == "none"


def test_a_given_context_string_is_decoded_and_used_as_given() -> None:
    view = View()
    put = session().put(KS, KEY, b"1", "", context=encode_context({"C": 7}), level="ONE")
    request = send(put.start(view)).request
    assert isinstance(request, PutRequest) and request.context == {"C": 7}
    assert put.context_used == "given"


def test_a_read_that_finds_nothing_forgets_the_context_and_forget_drops_it() -> None:
    view, s = View(), session()
    for result in (found({"A": 3}), GetResult("A", None, 2, 2)):
        get = s.get(KS, KEY, level="ONE")
        get.start(view)
        get.receive(result, view)
    assert s.context(KS, KEY) is None
    get = s.get(KS, KEY, level="ONE")
    get.start(view)
    get.receive(found({"A": 3}), view)
    s.forget(KS, KEY)
    assert s.context(KS, KEY) is None


def test_a_delete_without_a_context_reads_first_and_deletes_what_it_read() -> None:
    view, s = View(), session()
    delete = s.delete(KS, KEY, level="QUORUM")
    read = send(delete.start(view))
    assert isinstance(read.request, GetRequest) and read.node == walk(view)[0]
    write = send(delete.receive(found({"A": 2}, {"B": 1}, values=(b'"x"', b'"y"')), view))
    assert isinstance(write.request, PutRequest)
    assert write.request.value is None and write.request.context == {"A": 2, "B": 1}
    assert write.request.rid != read.request.rid  # two requests, two ids
    done = delete.receive(PutResult("A", 2, 2), view)
    assert isinstance(done, Done) and done.context_used == "read"
    assert done.removed is not None and [s.value for s in done.removed] == [b'"x"', b'"y"']


def test_a_delete_of_a_key_never_stored_reads_then_writes_a_tombstone_without_context() -> None:
    view = View()
    delete = session().delete(KS, KEY, level="ONE")
    delete.start(view)
    write = send(delete.receive(GetResult("A", None, 1, 1), view))
    assert isinstance(write.request, PutRequest) and write.request.context is None
    done = delete.receive(PutResult("A", 1, 1), view)
    assert isinstance(done, Done) and done.removed == ()


def test_a_delete_after_a_read_uses_the_remembered_context_without_reading_again() -> None:
    view, s = View(), session()
    get = s.get(KS, KEY, level="ONE")
    get.start(view)
    get.receive(found({"A": 4}), view)
    delete = s.delete(KS, KEY, level="ONE")
    request = send(delete.start(view)).request
    assert isinstance(request, PutRequest) and request.context == {"A": 4}
    done = delete.receive(PutResult("A", 1, 1), view)
    assert isinstance(done, Done) and done.context_used == "auto" and done.read is None


def test_a_blind_delete_warns_that_it_removes_nothing() -> None:
    view = View()
    delete = session().delete(KS, KEY, context="none", level="ONE")
    request = send(delete.start(view)).request
    assert isinstance(request, PutRequest) and request.context is None
    done = delete.receive(PutResult("A", 1, 1, warnings=("late",)), view)
    assert isinstance(done, Done) and done.warnings == (BLIND_DELETE_WARNING, "late")


def test_a_failed_read_of_a_delete_fails_the_delete_and_writes_nothing() -> None:
    view = View()
    delete = session().delete(KS, KEY, level="ONE", via="A")
    delete.start(view)
    step = delete.receive(LOST, view)
    assert isinstance(step, Failed) and isinstance(step.request, GetRequest)


def test_a_write_goes_around_a_node_that_did_not_run_it_to_the_next_live_replica() -> None:
    view = View()
    order = walk(view)
    view.down = {order[1]}
    put = session().put(KS, KEY, b"1", "", level="ONE")
    first = send(put.start(view))
    again = send(put.receive(NOT_LISTENING, view))
    assert (first.node, again.node) == (order[0], order[2])  # the down one is skipped
    assert again.request is first.request  # the same request: the same id
    done = put.receive(PutResult(order[2], 1, 1), view)
    assert isinstance(done, Done) and done.forwarded_by == ""


@pytest.mark.parametrize("failure", [LOST, BAD], ids=["outcome-unknown", "bad-input"])
def test_a_write_whose_outcome_is_unknown_or_whose_input_is_bad_is_not_sent_again(failure: Failure) -> None:
    view = View()
    put = session().put(KS, KEY, b"1", "", level="ONE")
    put.start(view)
    step = put.receive(failure, view)
    assert isinstance(step, Failed) and step.failure == failure and step.passed == ()


def test_a_read_goes_around_a_timeout_but_not_bad_input() -> None:
    view = View()
    get = session().get(KS, KEY, level="ONE")
    get.start(view)
    assert send(get.receive(LOST, view)).node == walk(view)[1]
    get = session().get(KS, KEY, level="ONE")
    get.start(view)
    assert isinstance(get.receive(BAD, view), Failed)


def test_a_request_goes_around_at_most_reroutes_times_and_its_error_names_each_node() -> None:
    view = View()
    order = walk(view)
    get = session().get(KS, KEY, level="ONE")
    nodes = [send(get.start(view)).node]
    step = get.receive(NOT_LISTENING, view)
    while isinstance(step, SendRequest):
        nodes.append(step.node)
        step = get.receive(NOT_LISTENING, view)
    assert nodes == order[: REROUTES + 1]
    assert isinstance(step, Failed) and [n for n, _ in step.passed] == order[:REROUTES]
    assert f"asked first: {order[0]}, which said the same" in str(step.error())


def test_a_coordinators_verdict_is_asked_of_one_more_coordinator_only() -> None:
    view = View()
    put = session().put(KS, KEY, b"1", "", level="QUORUM")
    put.start(view)
    send(put.receive(TOO_FEW, view))
    assert isinstance(put.receive(TOO_FEW, view), Failed)


def test_an_increment_keeps_its_request_id_around_a_node_and_in_its_error() -> None:
    view = View()
    incr = session().incr("counters", KEY, 2, "req-7", level="QUORUM")
    first = send(incr.start(view))
    again = send(incr.receive(NOT_LISTENING, view))
    assert isinstance(again.request, IncrRequest) and again.request.request_id == "req-7"
    assert again.request == first.request
    step = incr.receive(LOST, view)
    assert isinstance(step, Failed)
    assert "retry it with request id req-7 and it counts once" in str(step.error())


def test_a_write_via_a_node_that_forwarded_it_says_why_in_the_nodes_words() -> None:
    view = View()
    put = session().put(KS, KEY, b"1", "", level="ONE", via="E")
    put.start(view)
    reason = "E is not a replica of kv/k1 (A, B, C): it forwarded to A"
    done = put.receive(PutResult("A", 1, 1, forward_reason=reason), view)
    assert isinstance(done, Done) and (done.forwarded_by, done.forward_reason) == ("E", reason)
    incr = session().incr("counters", KEY, 1, "r", level="ONE", via="E")
    incr.start(view)
    done = incr.receive(IncrResult("B", 1, 1, 1, forward_reason="E is leaving"), view)
    assert isinstance(done, Done) and (done.forwarded_by, done.forward_reason) == ("E", "E is leaving")


def test_a_forwarded_write_from_an_older_node_that_gives_no_reason_still_says_it_forwarded() -> None:
    view = View()
    put = session().put(KS, KEY, b"1", "", level="ONE", via="E")
    put.start(view)
    done = put.receive(PutResult("A", 1, 1), view)
    assert isinstance(done, Done) and done.forwarded_by == "E"
    assert done.forward_reason == "E did not coordinate the write to kv/k1: it forwarded to A"
