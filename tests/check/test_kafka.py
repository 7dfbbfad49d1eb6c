"""The kafka workload (Gossip Glomers #5): its checker finds each anomaly, by Jepsen's name, in a
planted history and passes a correct one (no processes); its clients consume like Maelstrom's;
and against real nodes a correct leader node and a #5a single node pass while broken nodes (one
in JavaScript) are caught with the right anomaly named."""

from __future__ import annotations

from pathlib import Path
from random import Random
from typing import Any

import pytest

from bhandar_cli.check.check_run import run_checks
from bhandar_cli.check.maelstrom_history import INVALID, UNKNOWN, VALID, MaelstromHistory, Verdict
from bhandar_cli.check.maelstrom_workload import BadAnswer
from bhandar_cli.check.workloads.kafka import ANOMALIES, KEYS, Kafka
from tests.check.support import NODES, py, short

NODES_OF = ["n1", "n2"]


class Planted:
    """A history written by hand: each call appends one operation, its outcome, and a tick."""

    def __init__(self) -> None:
        self.history = MaelstromHistory()
        self.now = 0.0

    def op(
        self,
        client: str,
        f: str,
        value: Any,
        result: Any = None,
        kind: str = "ok",
        final: bool = False,
        node: str = "n1",
    ) -> None:
        op = self.history.invoke(self.now, client, node, f, value, final=final)
        self.now += 0.01
        if kind == "ok":
            op.answer(self.now, result)
        elif kind == "fail":
            op.failed(self.now, 11, "unavailable")
        else:
            op.gave_up(self.now, "no answer")
        self.now += 0.01

    def send(self, client: str, key: str, msg: int, offset: int | None, kind: str = "ok") -> None:
        self.op(client, "send", {"key": key, "msg": msg}, offset, kind)

    def poll(self, client: str, asked: dict[str, int], got: dict[str, list[tuple[int, Any]]]) -> None:
        self.op(client, "poll", {"offsets": asked}, got)

    def final(self, got: dict[str, list[tuple[int, Any]]]) -> None:
        self.op("c1", "poll", {"offsets": {k: 0 for k in KEYS}}, got, final=True)

    def commit(self, client: str, offsets: dict[str, int]) -> None:
        self.op(client, "commit_offsets", {"offsets": offsets})

    def committed(self, client: str, offsets: dict[str, int], node: str = "n1") -> None:
        self.op(client, "list_committed_offsets", {"keys": list(KEYS)}, offsets, node=node)

    def verdict(self) -> Verdict:
        return Kafka(Random(0), NODES_OF).check(self.history)


def _good() -> Planted:
    """Two producers and a consumer on key 0, sparse offsets (10, 12, 13) as Maelstrom allows; one
    message polled only by the final poll (no recency is required); commits that go back because
    a node keeps the last commit, not the highest."""
    h = Planted()
    h.committed("c3", {})
    h.send("c1", "0", 1, 10)
    h.send("c2", "0", 2, 12)
    h.poll("c3", {"0": 0}, {"0": [(10, 1), (12, 2)]})
    h.commit("c3", {"0": 12})
    h.committed("c2", {"0": 12})
    h.send("c1", "0", 3, 13)
    h.send("c2", "1", 4, 0)
    h.commit("c1", {"0": 10})
    h.committed("c2", {"0": 10})
    h.poll("c3", {"0": 13, "1": 0}, {"0": [(13, 3)]})
    h.final({"0": [(10, 1), (12, 2), (13, 3)], "1": [(0, 4)]})
    return h


def test_a_correct_history_is_valid() -> None:
    verdict = _good().verdict()
    assert verdict.status == VALID, verdict.summary
    assert verdict.stats["acknowledged"] == 4 and verdict.stats["lost"] == 0
    assert verdict.stats["final_polls"] == "1/1"


def _planted(kind: str) -> Planted:
    h = Planted()
    if kind == "lost-write":
        h.send("c1", "0", 1, 0)
        h.send("c1", "0", 2, 1)
        h.final({"0": [(1, 2)]})
    elif kind == "unseen":
        h.send("c1", "0", 1, 0)
        h.send("c1", "0", 2, 1)
        h.final({"0": [(0, 1)]})
    elif kind == "inconsistent-offsets":
        h.send("c1", "0", 1, 0)
        h.send("c2", "0", 2, 0)
        h.final({"0": [(0, 1)]})
    elif kind == "duplicate":
        h.send("c1", "0", 1, 0)
        h.final({"0": [(0, 1), (1, 1)]})
    elif kind == "G1a":
        h.send("c1", "0", 1, None, kind="fail")
        h.final({"0": [(0, 1)]})
    elif kind == "int-nonmonotonic-poll":
        h.send("c1", "0", 1, 0)
        h.send("c1", "0", 2, 1)
        h.final({"0": [(1, 2), (0, 1)]})
    elif kind == "int-poll-skip":
        h.send("c1", "0", 1, 0)
        h.send("c1", "0", 2, 1)
        h.send("c1", "0", 3, 2)
        h.poll("c2", {"0": 0}, {"0": [(0, 1), (2, 3)]})
        h.final({"0": [(0, 1), (1, 2), (2, 3)]})
    elif kind == "nonmonotonic-poll":
        h.send("c1", "0", 1, 0)
        h.send("c1", "0", 2, 1)
        h.poll("c2", {"0": 1}, {"0": [(0, 1), (1, 2)]})
        h.final({"0": [(0, 1), (1, 2)]})
    elif kind == "poll-skip":
        h.send("c1", "0", 1, 0)
        h.send("c1", "0", 2, 1)
        h.poll("c2", {"0": 0}, {"0": [(1, 2)]})
        h.final({"0": [(0, 1), (1, 2)]})
    elif kind == "nonmonotonic-send":
        h.send("c1", "0", 1, 5)
        h.send("c1", "0", 2, 3)
        h.final({"0": [(3, 2), (5, 1)]})
    elif kind == "committed-ahead":
        h.send("c1", "0", 1, 0)
        h.send("c1", "0", 2, 1)
        h.send("c1", "0", 3, 2)
        h.poll("c2", {"0": 0}, {"0": [(0, 1)]})
        h.commit("c2", {"0": 0})
        h.committed("c3", {"0": 2})
        h.final({"0": [(0, 1), (1, 2), (2, 3)]})
    elif kind == "committed-backwards":
        h.send("c1", "0", 1, 0)
        h.send("c1", "0", 2, 1)
        h.poll("c2", {"0": 0}, {"0": [(0, 1)]})
        h.commit("c2", {"0": 0})
        h.poll("c2", {"0": 1}, {"0": [(1, 2)]})
        h.commit("c2", {"0": 1})
        h.committed("c3", {"0": 1})
        h.committed("c3", {"0": 0})
        h.final({"0": [(0, 1), (1, 2)]})
    return h


@pytest.mark.parametrize("kind", ANOMALIES)
def test_each_anomaly_is_found_and_named_in_a_planted_history(kind: str) -> None:
    verdict = _planted(kind).verdict()
    assert verdict.status == INVALID, verdict.summary
    kinds = {p.kind for p in verdict.problems}
    assert kind in kinds, verdict.summary
    assert verdict.stats[kind] >= 1
    named = next(p for p in verdict.problems if p.kind == kind)
    assert named.ops and all(f"#{i}" in named.text for i in named.ops[:1]), named.text


def test_each_planted_history_shows_only_what_was_planted_or_implied() -> None:
    """The plants are minimal: no kind besides its own and what it implies (the message that lost
    its offset to another is never polled; a poll that skipped a message is how it was lost)."""
    implied = {
        "inconsistent-offsets": {"inconsistent-offsets", "unseen"},
        "lost-write": {"lost-write", "poll-skip"},
    }
    for kind in ANOMALIES:
        found = {p.kind for p in _planted(kind).verdict().problems}
        assert found <= implied.get(kind, {kind}), (kind, found)


def test_acknowledged_messages_nobody_polled_without_a_final_poll_answered_are_unknown() -> None:
    h = Planted()
    h.send("c1", "0", 1, 0)
    h.op("c1", "poll", {"offsets": {k: 0 for k in KEYS}}, None, kind="info", final=True)
    verdict = h.verdict()
    assert verdict.status == UNKNOWN and "no final poll was answered" in verdict.summary


def test_a_commit_of_a_lower_offset_may_lower_what_is_committed() -> None:
    """Maelstrom's nodes may keep the last commit: going back to an offset some client asked to
    commit after the earlier answer began is allowed; going back to one nobody asked for is not."""
    h = Planted()
    h.send("c1", "0", 1, 0)
    h.send("c1", "0", 2, 1)
    h.commit("c2", {"0": 1})
    h.committed("c3", {"0": 1})
    h.commit("c1", {"0": 0})
    h.committed("c3", {"0": 0})
    h.final({"0": [(0, 1), (1, 2)]})
    assert h.verdict().status == VALID


def test_committed_offsets_may_lag_across_nodes_but_not_on_one() -> None:
    """A node that reads committed offsets from seq-kv may answer an older one than another node
    did (Maelstrom passes it); one node going back on its own answer is committed-backwards."""

    def history(second: str) -> Planted:
        h = Planted()
        h.send("c1", "0", 1, 0)
        h.send("c1", "0", 2, 1)
        h.commit("c2", {"0": 0})
        h.commit("c2", {"0": 1})
        h.committed("c3", {"0": 1}, node="n1")
        h.committed("c3", {"0": 0}, node=second)
        h.final({"0": [(0, 1), (1, 2)]})
        return h

    assert history("n2").verdict().status == VALID
    verdict = history("n1").verdict()
    assert [p.kind for p in verdict.problems] == ["committed-backwards"]
    assert "n1's earlier list_committed_offsets -> 0@1" in verdict.problems[0].text


def test_the_clients_consume_as_maelstroms_do() -> None:
    """A client assigns first (committed offsets), polls from its position, commits the highest
    offsets a poll returned, and goes on from after them."""
    w = Kafka(Random(1), NODES_OF)
    history = MaelstromHistory()
    rng = Random(2)

    def step(result: Any) -> tuple[str, Any]:
        f, value = w.next_op(rng, 1)
        op = history.invoke(0.0, "c1", "n1", f, value)
        op.answer(0.1, result(f))
        w.completed(op)
        return f, value

    rest = {k: 0 for k in KEYS[1:]}
    assert step(lambda f: {"0": 4}) == ("list_committed_offsets", {"keys": list(KEYS)})
    answers = {"send": 0, "poll": {"0": [(4, 10), (6, 11)]}}
    seen = [step(answers.get) for _ in range(20)]
    polls = [i for i, (f, _) in enumerate(seen) if f == "poll"]
    assert polls and polls[0] + 1 < len(seen), seen
    first = polls[0]
    assert seen[first][1] == {"offsets": {"0": 4, **rest}}
    assert seen[first + 1] == ("commit_offsets", {"offsets": {"0": 6}})
    later = [value for f, value in seen[first + 1 :] if f == "poll"]
    assert later and later[0] == {"offsets": {"0": 7, **rest}}


def test_the_final_polls_go_on_page_after_page_while_acknowledged_sends_go_further() -> None:
    """A node may answer a poll with a few messages: Maelstrom polls on until it has seen every
    acknowledged offset, and so do the final polls; a node with nothing new is asked no more."""
    w = Kafka(Random(1), NODES_OF)
    history = MaelstromHistory()

    def done(node: str, f: str, value: Any, result: Any, final: bool) -> None:
        op = history.invoke(0.0, "c1", node, f, value, final=final)
        op.answer(0.1, result)
        w.completed(op)

    done("n1", "send", {"key": "0", "msg": 1}, 4, False)
    done("n1", "send", {"key": "1", "msg": 2}, 0, False)
    first = w.finals()
    assert first == [(n, "poll", {"offsets": {k: 0 for k in KEYS}}) for n in NODES_OF]
    done("n1", "poll", first[0][2], {"0": [(0, 9), (1, 8)], "1": [(0, 2)]}, True)
    done("n2", "poll", first[1][2], {"0": [(0, 9)]}, True)
    second = w.more_finals()
    assert second == [("n1", "poll", {"offsets": {"0": 2}}), ("n2", "poll", {"offsets": {"0": 1}})]
    done("n1", "poll", second[0][2], {"0": [(2, 7), (4, 1)]}, True)
    done("n2", "poll", second[1][2], {}, True)
    assert w.more_finals() == []


def _simulated(ops: int, forget: int | None = None) -> Verdict:
    """The workload's own clients (ten of them) against one correct log in this process, which
    answers polls in pages of up to 20 messages; `forget`: the send with that message is
    acknowledged but never stored."""
    w = Kafka(Random(1), NODES_OF)
    logs: dict[str, list[tuple[int, Any]]] = {}
    committed: dict[str, int] = {}
    history, rng = MaelstromHistory(), Random(2)

    def serve(f: str, v: Any) -> Any:
        if f == "send":
            log = logs.setdefault(v["key"], [])
            offset = len(log) + (1 if forget is not None and v["msg"] > forget else 0)
            if v["msg"] != forget:
                log.append((offset, v["msg"]))
            return offset
        if f == "poll":
            got = {k: [p for p in logs.get(k, []) if p[0] >= start][:20] for k, start in v["offsets"].items()}
            return {k: pairs for k, pairs in got.items() if pairs}
        if f == "commit_offsets":
            committed.update({k: max(o, committed.get(k, -1)) for k, o in v["offsets"].items()})
            return None
        return {k: committed[k] for k in v["keys"] if k in committed}

    def run(node: str, f: str, v: Any, client: str, final: bool) -> None:
        op = history.invoke(len(history.ops) * 0.002, client, node, f, v, final=final)
        op.answer(op.invoked + 0.001, serve(f, v))
        w.completed(op)

    for _ in range(ops):
        client = rng.randrange(1, 11)
        run("n1", *w.next_op(rng, client), f"c{client}", False)
    batch = w.finals()
    while batch:
        for node, f, v in batch:
            run(node, f, v, "c1", True)
        batch = w.more_finals()
    return w.check(history)


def test_a_long_history_against_a_correct_log_is_valid_and_one_forgotten_message_is_caught() -> None:
    verdict = _simulated(3000)
    assert verdict.status == VALID, verdict.summary
    assert verdict.stats["acknowledged"] > 500 and verdict.stats["commits"] > 300
    forgot = _simulated(3000, forget=200)
    assert forgot.status == INVALID
    assert forgot.stats["lost"] == 1 and "send 200 to key" in forgot.summary, forgot.summary


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"type": "poll_ok"}, 'without "msgs"'),
        ({"type": "poll_ok", "msgs": {"0": [[1]]}}, r"not \[offset, msg\]"),
        ({"type": "poll_ok", "msgs": {"0": [["1", 2]]}}, r"not \[offset, msg\]"),
        ({"type": "poll_ok", "msgs": {"0": 5}}, "not a list"),
    ],
)
def test_a_malformed_poll_answer_is_the_nodes_protocol_error(body: dict[str, Any], words: str) -> None:
    with pytest.raises(BadAnswer, match=words):
        Kafka(Random(0), NODES_OF).parse("poll", body)


def test_a_key_with_null_for_its_messages_has_none() -> None:
    """A Go node's nil slice marshals as null, which Maelstrom's schema takes for an empty list."""
    got = Kafka(Random(0), NODES_OF).parse("poll", {"type": "poll_ok", "msgs": {"0": None, "1": [[2, 5]]}})
    assert got == {"0": [], "1": [(2, 5)]}


def test_a_send_answer_without_an_integer_offset_is_a_protocol_error() -> None:
    w = Kafka(Random(0), NODES_OF)
    assert w.parse("send", {"type": "send_ok", "offset": 3}) == 3
    with pytest.raises(BadAnswer, match='"offset" is not int'):
        w.parse("send", {"type": "send_ok", "offset": "3"})
    with pytest.raises(BadAnswer, match="non-integer offset"):
        w.parse("list_committed_offsets", {"type": "list_committed_offsets_ok", "offsets": {"0": None}})


# (argv, node count, faults, the anomaly expected or "" for valid)
RUNS: list[tuple[tuple[str, ...], int, tuple[str, ...], str]] = [
    (py("kafka.py"), 3, (), ""),
    (py("kafka.py"), 3, ("partition", "kill", "pause", "duplicate"), ""),
    (py("kafka_single.py"), 1, (), ""),
    (py("kafka.py", PAGE="2", HOLD="1.5"), 3, (), ""),
    (py("kafka_kv.py"), 3, ("partition", "kill", "pause", "loss"), ""),
    (py("kafka_kv.py", KV="seq-kv"), 3, (), ""),
    (py("kafka.py", MODE="forget"), 3, (), "lost-write"),
    (("node", str(NODES / "kafka_local.js")), 3, (), "inconsistent-offsets"),
    (("env", "MODE=reverse", "node", str(NODES / "kafka_local.js")), 1, (), "int-nonmonotonic-poll"),
]


def test_real_nodes_get_maelstroms_verdict(tmp_path: Path) -> None:
    outcomes = run_checks(
        [
            short(argv, "kafka", tmp_path / str(i), node_count=n, nemesis=faults, seed=3, time_limit=1.5)
            for i, (argv, n, faults, _) in enumerate(RUNS)
        ]
    )
    for outcome, (argv, _, faults, kind) in zip(outcomes, RUNS, strict=True):
        verdict = outcome.verdict
        assert verdict is not None, (argv, outcome.error)
        if not kind:
            assert outcome.exit_code == 0, (argv, verdict.summary)
            assert bool(outcome.faults) == bool(faults)
            # Under faults clients wait out timeouts: fewer operations, but some answered.
            least = 1 if faults else 5
            assert verdict.stats["acknowledged"] >= least and verdict.stats["polls"] >= least, verdict.stats
            if "HOLD=1.5" in argv:  # nothing polled during the run: the final polls paged through it all
                pages = [op for op in outcome.history.ops if op.final and max(op.value["offsets"].values())]
                assert pages, "no final poll asked for a second page"
        else:
            assert outcome.exit_code == 1, (argv, verdict.summary)
            assert kind in {p.kind for p in verdict.problems}, (argv, verdict.summary)
