"""kafka (Gossip Glomers #5): append-only logs named by string keys, as Maelstrom's workload.

`send` {key, msg} -> `send_ok` {offset}; `poll` {offsets: {key: offset}} -> `poll_ok` {msgs:
{key: [[offset, msg], ...]}} (contiguous messages from the asked offset on; a key with none may be
left out); `commit_offsets` {offsets} -> `commit_offsets_ok`; `list_committed_offsets` {keys} ->
`list_committed_offsets_ok` {offsets} (a key never committed may be left out).

The clients behave like Maelstrom's: each is a consumer that starts by fetching the committed
offsets of the keys (`list_committed_offsets`, Jepsen's assign) and polls from there, each poll
from where its last one ended; after a poll that returned messages it commits the highest offset
it saw of each key. Now and then a client starts over as a fresh consumer (Maelstrom crashes its
clients), from the committed offsets. Sends and polls are half of the rest each; messages are
distinct integers; keys are a small set. After the heal, every node is polled from offset 0 of
every key, and polled on from where each answer ended while the acknowledged sends go further
(the final polls: a node may answer a poll with a page of its log).

Checker, with the anomaly names of Jepsen's kafka checker (which Maelstrom uses):
- lost-write: an acknowledged send that no poll returned, although a poll returned a later
  offset of its key; unseen: one that no poll returned at all, not even the final polls;
- inconsistent-offsets: two messages at one offset of a key (two sends given the same offset,
  or a poll that disagrees with a send or another poll);
- duplicate: one message at two offsets;
- int-nonmonotonic-poll / int-poll-skip: inside one poll, offsets that do not increase, or that
  jump over an offset known to exist (acknowledged by a send or returned by a poll);
- nonmonotonic-poll / poll-skip: a poll whose first offset is before the one asked for (each
  client asks from where it was), or that jumps over a known offset after it;
- nonmonotonic-send: a client's later send to a key given an offset not above its earlier one;
- G1a: a poll returned a message whose send failed definitely.
And two of Bhandar's own, on committed offsets (Maelstrom does not check them):
- committed-ahead: `list_committed_offsets` answered an offset past every offset a client had
  asked to commit, jumping over a known offset (a consumer resuming there would skip it);
- committed-backwards: a node answered an offset below one its own earlier answer gave, which
  no commit in between asked for (across nodes an answer may lag, as through seq-kv).
No recency is required: a message may be polled long after its ack, as Maelstrom allows. When
no final poll was answered, acknowledged messages nobody polled leave the verdict unknown.
"""

from __future__ import annotations

import bisect
import json
from collections import defaultdict
from dataclasses import dataclass, field
from itertools import pairwise
from random import Random
from typing import Any

from bhandar_cli.check.catalog import WORKLOADS
from bhandar_cli.check.maelstrom_history import (
    UNKNOWN,
    MaelstromHistory,
    MaelstromOperation,
    Problem,
    Verdict,
    judged,
)
from bhandar_cli.check.maelstrom_workload import BadAnswer, MaelstromWorkload, named, outcome, require

KEYS = tuple(str(k) for k in range(4))
FRESH_CONSUMER = 0.03  # chance that a client starts over from the committed offsets
SHOWN = 5  # offsets or operations named per problem
PER_KIND = 10  # problems of one kind listed; the rest are counted in the stats

# Every anomaly the checker names, the gravest first (problems and stats list them in this order).
ANOMALIES = (
    "lost-write",
    "unseen",
    "inconsistent-offsets",
    "duplicate",
    "G1a",
    "int-nonmonotonic-poll",
    "int-poll-skip",
    "nonmonotonic-poll",
    "poll-skip",
    "nonmonotonic-send",
    "committed-ahead",
    "committed-backwards",
)

Pairs = dict[str, list[tuple[int, Any]]]  # a poll's answer: key -> [(offset, msg), ...]


@dataclass
class Consumer:
    """What one client knows between its operations."""

    positions: dict[str, int] | None = None  # key -> next offset to poll; None: assign first
    to_commit: dict[str, int] = field(default_factory=dict)  # the last poll's highest offsets


def _offsets(body: dict[str, Any], name: str) -> dict[str, int]:
    value = require(body, name, (dict,))
    for key, offset in value.items():
        if type(offset) is not int:
            raise BadAnswer(f'{body.get("type")} whose "{name}" gives key {key!r} a non-integer offset')
    return dict(value)


def parse_msgs(body: dict[str, Any]) -> Pairs:
    """A poll_ok's `msgs`: key -> [(offset, msg)], or BadAnswer when it is not that shape."""
    msgs = require(body, "msgs", (dict,))
    out: Pairs = {}
    for key, pairs in msgs.items():
        if pairs is None:  # Go's nil slice: Maelstrom's schema takes null for an empty list
            out[key] = []
            continue
        if type(pairs) is not list:
            raise BadAnswer(f'poll_ok whose "msgs" gives key {key!r} a {type(pairs).__name__}, not a list')
        got: list[tuple[int, Any]] = []
        for pair in pairs:
            if type(pair) is not list or len(pair) != 2 or type(pair[0]) is not int:
                raise BadAnswer(f"poll_ok with {json.dumps(pair)[:60]} in key {key!r}, not [offset, msg]")
            got.append((pair[0], pair[1]))
        out[key] = got
    return out


def _text(msg: Any) -> str:
    """A message as one comparable text (the clients' messages are integers: the fast path)."""
    return str(msg) if type(msg) is int else json.dumps(msg, sort_keys=True)


def _listed(pairs: list[tuple[int, Any]]) -> str:
    """A poll's messages of one key as `offset=msg`, the first few."""
    shown = " ".join(f"{offset}={_text(msg)}" for offset, msg in pairs[:SHOWN])
    return shown + (f" and {len(pairs) - SHOWN} more" if len(pairs) > SHOWN else "")


def _span(offsets: list[int]) -> str:
    shown = ", ".join(map(str, offsets[:SHOWN]))
    return shown + (f" and {len(offsets) - SHOWN} more" if len(offsets) > SHOWN else "")


class Kafka(MaelstromWorkload):
    name = "kafka"
    doc = WORKLOADS[name]

    def __init__(self, rng: Random, nodes: list[str]) -> None:
        super().__init__(rng, nodes)
        self.consumers: dict[str, Consumer] = {}
        self.top: dict[str, int] = {}  # key -> the highest offset a send was acknowledged with
        self.paging: dict[str, dict[str, int]] = {}  # node -> what its last final poll asked
        self.last_final: dict[str, MaelstromOperation] = {}  # node -> its last answered final poll

    # --- the clients ---------------------------------------------------------------------------------

    def next_op(self, rng: Random, client: int) -> tuple[str, Any]:
        me = self.consumers.setdefault(f"c{client}", Consumer())
        if me.to_commit:
            offsets, me.to_commit = me.to_commit, {}
            return "commit_offsets", {"offsets": offsets}
        if me.positions is not None and rng.random() < FRESH_CONSUMER:
            me.positions = None
        if me.positions is None:
            return "list_committed_offsets", {"keys": list(KEYS)}
        if rng.random() < 0.5:
            return "send", {"key": rng.choice(KEYS), "msg": self.unique()}
        return "poll", {"offsets": dict(me.positions)}

    def completed(self, op: MaelstromOperation) -> None:
        me = self.consumers.setdefault(op.client, Consumer())
        if not op.ok:
            return
        if op.final:
            self.last_final[op.node] = op
            return
        if op.f == "send":
            self.top[op.value["key"]] = max(op.result, self.top.get(op.value["key"], -1))
        if op.f == "list_committed_offsets":
            me.positions = {k: op.result.get(k, 0) for k in KEYS}
        elif op.f == "poll" and me.positions is not None:
            for key, pairs in op.result.items():
                if pairs:
                    top = max(o for o, _ in pairs)
                    me.positions[key] = max(me.positions.get(key, 0), top + 1)
                    me.to_commit[key] = top

    def request(self, f: str, value: Any) -> dict[str, Any]:
        return {"type": f, **value}

    def parse(self, f: str, body: dict[str, Any]) -> Any:
        if f == "send":
            return require(body, "offset", (int,))
        if f == "poll":
            return parse_msgs(body)
        if f == "list_committed_offsets":
            return _offsets(body, "offsets")
        return None

    def finals(self) -> list[tuple[str, str, Any]]:
        self.paging = {node: {k: 0 for k in KEYS} for node in self.nodes}
        return [(node, "poll", {"offsets": dict(asked)}) for node, asked in self.paging.items()]

    def more_finals(self) -> list[tuple[str, str, Any]]:
        """The next page of each node's final poll: from after the last offset it returned, of
        each key whose acknowledged sends went further (Maelstrom polls on until it has seen
        them). A node that gave no answer, or nothing new, is asked no more."""
        paging: dict[str, dict[str, int]] = {}
        for node, asked in self.paging.items():
            last = self.last_final.get(node)
            if last is None or last.value["offsets"] != asked:
                continue
            after = {}
            for key, start in asked.items():
                reached = max((o for o, _ in last.result.get(key, [])), default=-1)
                if reached >= start and self.top.get(key, -1) > reached:
                    after[key] = reached + 1
            if after:
                paging[node] = after
        self.paging = paging
        return [(node, "poll", {"offsets": dict(asked)}) for node, asked in paging.items()]

    def show(self, op: MaelstromOperation) -> str:
        v = op.value
        if op.f == "send":
            got = f"offset {op.result}" if op.ok else outcome(op)
            return f"send {v['msg']} to key {v['key']} -> {got}"
        if op.f == "poll":
            asked = ", ".join(f"{k}@{o}" for k, o in sorted(v["offsets"].items()))
            if not op.ok:
                return f"poll {asked} -> {outcome(op)}"
            got = "; ".join(f"{k}: {_listed(pairs)}" for k, pairs in sorted(op.result.items()) if pairs)
            return f"poll {asked} -> {got or 'nothing'}"
        if op.f == "commit_offsets":
            asked = ", ".join(f"{k}@{o}" for k, o in sorted(v["offsets"].items()))
            return f"commit_offsets {asked} -> {outcome(op)}"
        got = ", ".join(f"{k}@{o}" for k, o in sorted(op.result.items())) if op.ok else outcome(op)
        return f"list_committed_offsets -> {got or 'none'}"

    # --- the checker ---------------------------------------------------------------------------------

    def check(self, history: MaelstromHistory) -> Verdict:
        return KafkaCheck(self, history).verdict()


class KafkaCheck:
    """One judgement of a kafka history (the state its passes share)."""

    def __init__(self, workload: Kafka, history: MaelstromHistory) -> None:
        self.w = workload
        self.ops = history.ops
        self.sends = [op for op in self.ops if op.f == "send"]
        self.acked = [op for op in self.sends if op.ok]
        self.polls = [op for op in self.ops if op.f == "poll" and op.ok]
        self.found: dict[str, list[Problem]] = defaultdict(list)
        self.counts: dict[str, int] = defaultdict(int)
        # key -> offset -> msg text -> the first op that showed it there
        self.at: dict[str, dict[int, dict[str, MaelstromOperation]]] = defaultdict(lambda: defaultdict(dict))
        for op in self.acked:
            self.at[op.value["key"]][op.result].setdefault(_text(op.value["msg"]), op)
        for op in self.polls:
            for key, pairs in op.result.items():
                for offset, msg in pairs:
                    self.at[key][offset].setdefault(_text(msg), op)
        self.known = {key: sorted(offsets) for key, offsets in self.at.items()}

    def problem(self, kind: str, text: str, ops: tuple[int, ...], count: int = 1) -> None:
        """One problem (`count` instances of the anomaly, as the stats count them)."""
        self.counts[kind] += count
        if len(self.found[kind]) < PER_KIND:
            self.found[kind].append(Problem(kind, text, ops))

    def between(self, key: str, low: int, high: int) -> list[int]:
        """Known offsets of `key` strictly between `low` and `high`."""
        known = self.known.get(key, [])
        return known[bisect.bisect_right(known, low) : bisect.bisect_left(known, high)]

    def said(self, op: MaelstromOperation, key: str | None = None) -> str:
        """An operation as a problem names it; a poll with only the messages of `key`."""
        if key is None or op.f != "poll" or not op.ok:
            return named(op, self.w.show(op))
        got = _listed(op.result.get(key, [])) or "nothing"
        return named(op, f"poll {key}@{op.value['offsets'].get(key, '?')} -> {got}")

    def verdict(self) -> Verdict:
        self.offsets_and_messages()
        self.polls_in_order()
        self.sends_in_order()
        unobserved = self.lost()
        self.committed()
        finals = [op for op in self.ops if op.f == "poll" and op.final]
        answered = [op for op in finals if op.ok]
        stats: dict[str, Any] = {
            "acknowledged": len(self.acked),
            "attempted": len(self.sends),
            "polls": sum(1 for op in self.polls if not op.final),
            "commits": sum(1 for op in self.ops if op.f == "commit_offsets" and op.ok),
            "keys": len(self.known),
            "lost": self.counts["lost-write"] + self.counts["unseen"],
            "final_polls": f"{len(answered)}/{len(finals)}",
            **{kind: self.counts.get(kind, 0) for kind in ANOMALIES},
        }
        problems = [p for kind in ANOMALIES for p in self.found.get(kind, [])]
        if not problems and unobserved and not answered:
            why = "no final poll was answered" if finals else "no final poll was made"
            summary = (
                f"Cannot tell whether the {len(unobserved)} acknowledged message(s) no poll returned are "
                f"lost: {why}."
            )
            return Verdict(UNKNOWN, summary, (), stats)
        checked = (
            f"All {len(self.acked)} acknowledged sends were polled at their offsets, in order, with no "
            f"offset skipped, reused or returned twice, over {len(self.known)} keys; committed offsets "
            "stayed within what clients committed."
        )
        return judged(problems, checked, stats)

    def offsets_and_messages(self) -> None:
        """inconsistent-offsets, duplicate and G1a."""
        where: dict[str, list[tuple[str, int, MaelstromOperation]]] = defaultdict(list)
        for key, offsets in sorted(self.at.items()):
            for offset, msgs in sorted(offsets.items()):
                for text, op in msgs.items():
                    where[text].append((key, offset, op))
                if len(msgs) > 1:
                    shown = "; ".join(
                        f"{text} ({self.said(op, key)})" for text, op in list(msgs.items())[:SHOWN]
                    )
                    self.problem(
                        "inconsistent-offsets",
                        f"Offset {offset} of key {key} holds {len(msgs)} different messages: {shown}.",
                        tuple(op.index for op in msgs.values()),
                    )
        for text, places in where.items():
            if len(places) > 1:
                shown = "; ".join(f"key {k} offset {o} ({self.said(op, k)})" for k, o, op in places[:SHOWN])
                self.problem(
                    "duplicate",
                    f"Message {text} is at {len(places)} offsets: {shown}.",
                    tuple(op.index for _, _, op in places[:SHOWN]),
                )
        failed = {_text(op.value["msg"]): op for op in self.sends if op.type == "fail"}
        for text, places in where.items():
            if text in failed:
                key, offset, seen = places[0]
                self.problem(
                    "G1a",
                    f"{self.said(seen, key)} returned message {text} at offset {offset} of key {key}, but "
                    f"its {self.said(failed[text])} failed definitely.",
                    (seen.index, failed[text].index),
                )

    def polls_in_order(self) -> None:
        """int-nonmonotonic-poll, int-poll-skip, nonmonotonic-poll and poll-skip."""
        for op in self.polls:
            asked: dict[str, int] = op.value["offsets"]
            for key, pairs in sorted(op.result.items()):
                if not pairs:
                    continue
                first = pairs[0][0]
                if key in asked and first < asked[key]:
                    self.problem(
                        "nonmonotonic-poll",
                        f"{self.said(op, key)} began at offset {first}, before the offset "
                        f"{asked[key]} it was asked for.",
                        (op.index,),
                    )
                elif key in asked and (skipped := self.skipped_before(key, asked[key], pairs)):
                    self.problem(
                        "poll-skip",
                        f"{self.said(op, key)} began at offset {first}, skipping offset(s) "
                        f"{_span(skipped)} after the offset {asked[key]} it was asked for, which exist.",
                        (op.index, *self.shown_at(key, skipped)),
                    )
                for (a, _), (b, _) in pairwise(pairs):
                    if b <= a:
                        self.problem(
                            "int-nonmonotonic-poll",
                            f"{self.said(op, key)} returned offset {b} after offset {a}.",
                            (op.index,),
                        )
                        break
                    if skipped := self.between(key, a, b):
                        self.problem(
                            "int-poll-skip",
                            f"{self.said(op, key)} went from offset {a} to {b}, skipping offset(s) "
                            f"{_span(skipped)}, which exist.",
                            (op.index, *self.shown_at(key, skipped)),
                        )
                        break

    def skipped_before(self, key: str, asked: int, pairs: list[tuple[int, Any]]) -> list[int]:
        """Known offsets from `asked` on, before the poll's first, that the poll did not return."""
        returned = {offset for offset, _ in pairs}
        return [o for o in self.between(key, asked - 1, pairs[0][0]) if o not in returned]

    def shown_at(self, key: str, offsets: list[int]) -> tuple[int, ...]:
        """The operations that show the first few of these offsets exist."""
        return tuple(next(iter(self.at[key][o].values())).index for o in offsets[:SHOWN])

    def sends_in_order(self) -> None:
        """nonmonotonic-send: a client's sends to one key, one after the other, must climb."""
        last: dict[tuple[str, str], MaelstromOperation] = {}
        for op in self.acked:
            key = op.value["key"]
            before = last.get((op.client, key))
            if before is not None and op.result <= before.result:
                self.problem(
                    "nonmonotonic-send",
                    f"{op.client}'s {self.said(op)} came after its {self.said(before)}, but got a "
                    "lower or equal offset.",
                    (before.index, op.index),
                )
            last[(op.client, key)] = op

    def lost(self) -> list[MaelstromOperation]:
        """lost-write and unseen; the acknowledged sends no poll returned."""
        polled: set[tuple[str, int, str]] = set()
        # key -> the highest offset polled so far, after each poll that raised it (in history order):
        # the first poll past a send's offset is found by bisection
        climbs: dict[str, tuple[list[int], list[MaelstromOperation]]] = defaultdict(lambda: ([], []))
        for op in self.polls:
            for key, pairs in op.result.items():
                for offset, msg in pairs:
                    polled.add((key, offset, _text(msg)))
                tops, by = climbs[key]
                top = max((o for o, _ in pairs), default=-1)
                if top > (tops[-1] if tops else -1):
                    tops.append(top)
                    by.append(op)
        unobserved = [
            op for op in self.acked if (op.value["key"], op.result, _text(op.value["msg"])) not in polled
        ]
        unseen: dict[str, list[MaelstromOperation]] = defaultdict(list)
        for op in unobserved:
            key = op.value["key"]
            tops, by = climbs[key]
            past = bisect.bisect_right(tops, op.result)
            if past < len(tops):
                self.problem(
                    "lost-write",
                    f"{self.said(op)} was acknowledged, but no poll returned it, although "
                    f"{self.said(by[past], key)} returned a later offset of key {key}.",
                    (op.index, by[past].index),
                )
            else:
                unseen[key].append(op)
        if any(op.final and op.ok for op in self.ops if op.f == "poll"):
            for key, ops in sorted(unseen.items()):
                shown = "; ".join(self.said(op) for op in ops[:SHOWN])
                more = f" and {len(ops) - SHOWN} more" if len(ops) > SHOWN else ""
                self.problem(
                    "unseen",
                    f"{len(ops)} acknowledged send(s) to key {key} were never returned by any poll, "
                    f"not even the final polls (from offset 0, page after page): {shown}{more}.",
                    tuple(op.index for op in ops[:SHOWN]),
                    count=len(ops),
                )
        return unobserved

    def committed(self) -> None:
        """committed-ahead and committed-backwards, from list_committed_offsets' answers."""
        # in invocation order, as the history is
        commits = [op for op in self.ops if op.f == "commit_offsets" and op.type != "fail"]
        # key -> the invocation times of its commits, and the highest offset asked for up to each
        asked: dict[str, tuple[list[float], list[int]]] = defaultdict(lambda: ([], []))
        # (key, offset) -> the latest a commit of exactly that offset completed
        last_commit: dict[tuple[str, int], float] = {}
        for c in commits:
            for key, offset in c.value["offsets"].items():
                times, most = asked[key]
                times.append(c.invoked)
                most.append(max(offset, most[-1] if most else -1))
                last_commit[(key, offset)] = max(c.completed, last_commit.get((key, offset), -1.0))
        lists = [op for op in self.ops if op.f == "list_committed_offsets" and op.ok]
        for op in lists:
            for key, offset in sorted(op.result.items()):
                times, most = asked[key]
                before = bisect.bisect_left(times, op.completed)
                highest = most[before - 1] if before else -1
                skipped = self.between(key, highest, offset) if offset > highest else []
                if skipped:
                    self.problem(
                        "committed-ahead",
                        f"{self.said(op)} gave key {key} committed offset {offset}, but no client had asked "
                        f"to commit past {highest}: a consumer resuming there skips offset(s) "
                        f"{_span(skipped)}, which exist.",
                        (op.index, *self.shown_at(key, skipped)),
                    )
        # One node against itself: across nodes an answer may lag (a node reading seq-kv sees the
        # service as it was), which Maelstrom allows.
        by_node: dict[str, list[MaelstromOperation]] = defaultdict(list)
        for op in lists:
            by_node[op.node].append(op)
        for answers in by_node.values():
            done = sorted(answers, key=lambda op: op.completed)
            ends = [op.completed for op in done]
            for later in answers:
                earlier_ones = done[: bisect.bisect_left(ends, later.invoked)]
                for key, offset in sorted(later.result.items()):
                    self.went_back(key, offset, later, earlier_ones, last_commit)

    def went_back(
        self,
        key: str,
        offset: int,
        later: MaelstromOperation,
        earlier_ones: list[MaelstromOperation],
        last_commit: dict[tuple[str, int], float],
    ) -> None:
        """committed-backwards: `later` answered `offset` for `key`, below an earlier answer of its
        node, unless a commit of exactly `offset` may have overwritten that answer since (a node may
        keep the last commit rather than the highest)."""
        for earlier in reversed(earlier_ones):
            was = earlier.result.get(key)
            if was is None or offset >= was or last_commit.get((key, offset), -1.0) > earlier.invoked:
                continue
            self.problem(
                "committed-backwards",
                f"{self.said(later)} gave key {key} committed offset {offset}, below the {was} of "
                f"{later.node}'s earlier {self.said(earlier)}, and no commit since asked for {offset}.",
                (earlier.index, later.index),
            )
            return
