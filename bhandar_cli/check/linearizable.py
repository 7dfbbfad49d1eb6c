"""Is a register history linearizable? A Wing-Gong search with Lowe's memoization, per key.

A history of reads, writes and compare-and-sets is linearizable when some total order of its
operations respects real time (an operation that completed before another began comes first)
and replays on one register to the results the clients saw. Keys are independent registers, so
each key's operations are checked alone (Herlihy and Wing's locality), which is what makes the
search tractable, as in Knossos and Porcupine.

The search walks the history's calls and returns in time order, trying to linearize one pending
call at a time (it must be consistent with the register's state); when it meets a return whose
operation it has not linearized yet, it backtracks. Each (set of operations linearized, register
state) pair is visited once: a second visit can reach nothing the first did not.

What each outcome tells the model:
- an `ok` read saw its value; a read answered with error 20 saw no value (the key absent);
- a `cas` answered 22 saw a value other than its `from`, one answered 20 saw none;
- any other definite error means the operation never happened (it is left out);
- an indefinite outcome (`info`) may have happened at any time after its call, or never: its
  return is at infinity, and an unanswered read constrains nothing and is left out.

Indefinite operations are what makes the search explode (each may be linearized anywhere after
its call): those whose value no operation observes are left out first (`decide`), which is exact
unless a cas saw "some other value". A search that exceeds its budget is cut off and the key is
reported unknown, never guessed. When a key is not linearizable, `explain` shrinks its history,
by reductions that keep a failure a proof, to a few operations (usually two writes and a read):
the concrete counterexample a person reads.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from dataclasses import dataclass
from typing import Any

from bhandar_cli.check.maelstrom_history import MaelstromOperation
from bhandar_cli.check.protocol import KEY_MISSING, PRECONDITION_FAILED

ABSENT = "\x00absent"  # the state of a key nobody wrote (no JSON text starts with a NUL)
STATE_BUDGET = 1_000_000  # states visited per key before the search is cut off
CHECK_SECONDS = 60.0  # for every key's search together
EXPLAIN_SECONDS = 3.0


@dataclass(frozen=True, slots=True)
class RegOp:
    """One operation of a key as the model sees it."""

    id: int  # the history's op index
    call: float
    ret: float  # math.inf: may take effect any time after its call
    kind: str  # r | w | cas | cas-fail (saw a value other than `a`) | cas-absent
    a: str = ""  # canonical JSON: read value, written value, cas from
    b: str = ""  # cas to


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def register_op(op: MaelstromOperation) -> tuple[str, RegOp] | None:
    """(key, the model's view of `op`), or None when the op constrains nothing."""
    key = canonical(op.value.get("key"))
    ret = op.completed if op.type != "info" else math.inf
    if op.f == "read":
        if op.type == "ok":
            return key, RegOp(op.index, op.invoked, ret, "r", canonical(op.result))
        if op.type == "fail" and op.code == KEY_MISSING:
            return key, RegOp(op.index, op.invoked, ret, "r", ABSENT)
        return None
    if op.type == "fail" and op.f == "cas" and op.code in (KEY_MISSING, PRECONDITION_FAILED):
        kind = "cas-absent" if op.code == KEY_MISSING else "cas-fail"
        return key, RegOp(op.index, op.invoked, ret, kind, canonical(op.value["from"]))
    if op.type == "fail":
        return None
    if op.f == "write":
        return key, RegOp(op.index, op.invoked, ret, "w", canonical(op.value["value"]))
    if op.f == "cas":
        return key, RegOp(
            op.index, op.invoked, ret, "cas", canonical(op.value["from"]), canonical(op.value["to"])
        )
    return None


def step(state: str, op: RegOp) -> str | None:
    """The state after `op`, or None if `op` cannot happen in `state`."""
    kind = op.kind
    if kind == "r":
        return state if state == op.a else None
    if kind == "w":
        return op.a
    if kind == "cas":
        if state == op.a:
            return op.b
        return state if op.ret == math.inf else None  # an indefinite cas may have failed
    if kind == "cas-fail":
        return state if state not in (op.a, ABSENT) else None
    return state if state == ABSENT else None  # cas-absent


class CutOff(Exception):
    """The search went past its budget."""


def linearizable(
    ops: list[RegOp], budget: int = STATE_BUDGET, deadline: float = math.inf, stuck: list[RegOp] | None = None
) -> bool:
    """Whether one key's operations are linearizable; CutOff past `budget` states or, looked at
    every few thousand states, past `deadline` (time.monotonic()). When it is not, `stuck` (if
    given) gets the operation whose return stopped the search when it had got furthest: where a
    counterexample ends."""
    finite = [o for o in ops if o.ret != math.inf]
    if not finite:
        return True
    # Calls and returns in time order (calls first at equal times: such operations overlap).
    events = sorted(
        [(o.call, 0, i) for i, o in enumerate(ops)] + [(o.ret, 1, i) for i, o in enumerate(ops)],
        key=lambda e: (e[0], e[1]),
    )
    n = len(events)
    # A doubly linked list over event positions 1..n, with 0 the head and n+1 the tail.
    nxt = [*list(range(1, n + 2)), n + 1]
    prv = [0, *range(0, n + 1)]
    op_of = [-1] + [e[2] for e in events] + [-1]
    is_call = [False] + [e[1] == 0 for e in events] + [False]
    ret_pos = [0] * len(ops)
    for pos in range(1, n + 1):
        if not is_call[pos]:
            ret_pos[op_of[pos]] = pos
    left = len(finite)  # finite operations not linearized yet

    def lift(pos: int) -> None:
        for p in (pos, ret_pos[op_of[pos]]):
            nxt[prv[p]] = nxt[p]
            prv[nxt[p]] = prv[p]

    def unlift(pos: int) -> None:
        for p in (ret_pos[op_of[pos]], pos):
            nxt[prv[p]] = p
            prv[nxt[p]] = p

    seen: set[tuple[int, str]] = set()
    stack: list[tuple[int, str]] = []  # (call position, state before it)
    state, bits = ABSENT, 0
    pos = nxt[0]
    visited = 0
    furthest, blocker = -1, -1
    while left:
        if is_call[pos]:
            i = op_of[pos]
            new = step(state, ops[i])
            if new is not None:
                key = (bits | (1 << i), new)
                if key not in seen:
                    visited += 1
                    if visited > budget:
                        raise CutOff(f"the search visited more than {budget:,} states")
                    if not visited & 4095 and time.monotonic() > deadline:
                        raise CutOff(f"the search ran out of time after {visited:,} states")
                    seen.add(key)
                    stack.append((pos, state))
                    state, bits = new, key[0]
                    if ops[i].ret != math.inf:
                        left -= 1
                    lift(pos)
                    pos = nxt[0]
                    continue
            pos = nxt[pos]
            continue
        if ops[op_of[pos]].ret == math.inf:
            return True  # only indefinite operations remain: they can all come last
        if len(stack) > furthest:
            furthest, blocker = len(stack), op_of[pos]
        if not stack:
            if stuck is not None and blocker >= 0:
                stuck.append(ops[blocker])
            return False
        pos, state = stack.pop()
        i = op_of[pos]
        bits ^= 1 << i
        if ops[i].ret != math.inf:
            left += 1
        unlift(pos)
        pos = nxt[pos]
    return True


def made(op: RegOp) -> str:
    """The value a write or a cas leaves."""
    return op.b if op.kind == "cas" else op.a


CHANGES = ("w", "cas")  # the kinds that can change the register; the others only observe it


def unobserved_unsure(ops: list[RegOp]) -> list[RegOp]:
    """The indefinite writes and cas whose value no operation reads or expects. Leaving one out
    can only remove a way to linearize (it may also happen last, or never), so a history valid
    without them is valid; and only a cas that found another value (`cas-fail`) can need a
    value nobody observes, so without such a cas leaving them out is exact."""
    observed = {o.a for o in ops if o.kind in ("r", "cas")}
    return [o for o in ops if o.ret == math.inf and o.kind in CHANGES and made(o) not in observed]


def bounded(ops: list[RegOp]) -> list[RegOp]:
    """`ops` with each indefinite write (or cas) whose value is observed, and written by it
    alone, returning at the earliest observer's return: it must come before every operation that
    saw its value, so it cannot be linearized later. Exact, and it keeps such operations from
    floating to infinity."""
    writers: dict[str, int] = {}
    for o in ops:
        if o.kind in CHANGES:
            writers[made(o)] = writers.get(made(o), 0) + 1
    first_seen: dict[str, float] = {}
    for o in ops:
        if o.kind in ("r", "cas") and o.ret < first_seen.get(o.a, math.inf):
            first_seen[o.a] = o.ret
    out = []
    for o in ops:
        seen = first_seen.get(made(o), math.inf) if o.kind in CHANGES else math.inf
        if o.ret == math.inf and writers.get(made(o)) == 1 and o.call <= seen < math.inf:
            o = RegOp(o.id, o.call, seen, o.kind, o.a, o.b)
        out.append(o)
    return out


def decide(ops: list[RegOp], budget: int = STATE_BUDGET, deadline: float = math.inf) -> bool:
    """`linearizable`, searching first without the indefinite operations nobody observed and
    with the observed ones bounded (which is what keeps a history with many timeouts
    tractable), the whole history only when leaving some out was not exact and it failed."""
    ops = bounded(ops)
    dropped = unobserved_unsure(ops)
    if not dropped:
        return linearizable(ops, budget, deadline)
    gone = {id(o) for o in dropped}
    if linearizable([o for o in ops if id(o) not in gone], budget, deadline):
        return True
    if not any(o.kind == "cas-fail" for o in ops):
        return False
    return linearizable(ops, budget, deadline)


def explain(ops: list[RegOp], seconds: float = EXPLAIN_SECONDS) -> list[RegOp]:
    """A small subset of a non-linearizable history that is still not linearizable, and whose
    failure proves the history's: only reductions that cannot turn a linearizable history into
    one that is not are made (within `seconds`):
    1. the shortest prefix that fails: the operations completed by some time, those still running
       then made indefinite (anything later can be linearized after them);
    2. operations that only observe the register (reads, cas that found another value) left
       out while it still fails (a read removed only removes a constraint);
    3. writes left out where `droppable` allows.
    """
    deadline = time.monotonic() + seconds

    def fails(subset: list[RegOp]) -> bool:
        try:
            return not decide(subset, 200_000, deadline)
        except CutOff:
            return False

    done = sorted((o for o in ops if o.ret != math.inf), key=lambda o: o.ret)

    def prefix(count: int) -> list[RegOp]:
        cut = done[count - 1].ret
        out = []
        for o in ops:
            if o.ret <= cut:
                out.append(o)
            elif o.call <= cut and o.kind in CHANGES:
                out.append(RegOp(o.id, o.call, math.inf, o.kind, o.a, o.b))
        return out

    lo, hi = 1, len(done)  # the prefix of `hi` completions fails (the whole history does)
    stuck: list[RegOp] = []
    with contextlib.suppress(CutOff):
        linearizable(bounded(ops), 200_000, deadline, stuck)
    if stuck:  # the search got furthest up to this operation's return: try that prefix first
        at = next(i for i, o in enumerate(done, 1) if o.ret >= stuck[0].ret)
        if fails(prefix(at)):
            hi = at
    while lo < hi and time.monotonic() < deadline:
        mid = (lo + hi) // 2
        if fails(prefix(mid)):
            hi = mid
        else:
            lo = mid + 1
    kept = prefix(hi)
    kept = near(kept, done[hi - 1], fails, deadline)

    for _ in range(2):  # observers first, then the writes they no longer need, then again
        chunk = max(1, len(kept) // 2)
        while time.monotonic() < deadline:
            i, shrunk = 0, False
            while i < len(kept) and time.monotonic() < deadline:
                part, rest = kept[i : i + chunk], kept[:i] + kept[i + chunk :]
                if rest and all(droppable(o, rest) for o in part) and fails(rest):
                    kept, shrunk = rest, True
                else:
                    i += chunk
            if chunk == 1 and not shrunk:
                break
            chunk = max(1, chunk // 2)
    return sorted(kept, key=lambda o: o.call)


def droppable(o: RegOp, rest: list[RegOp]) -> bool:
    """May `o` leave a failing subset whose failure must still prove the history's? An operation
    that only observes always may (a removed read removes a constraint). A write or cas may
    when nothing left observes its value and every cas that found another value (the one kind
    of operation its value could satisfy unseen) is after a later write that completed before
    that cas began: then no linearization puts `o`'s value in front of such a cas, and removing
    `o` from any linearization of the rest with it leaves one of the rest."""
    if o.kind not in CHANGES:
        return True
    value = made(o)
    if any(x.a == value for x in rest if x.kind in ("r", "cas")):
        return False
    for f in rest:
        shadowed = any(w.kind in CHANGES and o.ret < w.call and w.ret < f.call for w in rest)
        if f.kind == "cas-fail" and o.call < f.ret and not shadowed:
            return False
    return True


def near(kept: list[RegOp], culprit: RegOp, fails: Any, deadline: float) -> list[RegOp]:
    """The failing prefix narrowed to the operations around its last one (the culprit): those
    from a while before its call on, and every earlier write that `droppable` will not let go
    (repeated until nothing more is needed). The window widens until the narrowed set fails."""
    span = max(culprit.ret - culprit.call, 1e-3)
    earliest = min(o.call for o in kept)
    while time.monotonic() < deadline:
        start = culprit.call - span
        window = [o for o in kept if o.ret >= start]
        far = [o for o in kept if o.ret < start and o.kind in CHANGES]
        finished = sorted((o for o in far if o.ret != math.inf), key=lambda o: o.ret)
        for f in [o for o in window if o.kind == "cas-fail"]:
            # the last write completed before the cas began: every write before it is shadowed
            shadow = next((w for w in reversed(finished) if w.ret < f.call), None)
            if shadow is not None and shadow not in window:
                window.append(shadow)
                far.remove(shadow)
        while True:
            needed = [o for o in far if not droppable(o, window)]
            if not needed:
                break
            window += needed
            far = [o for o in far if o not in needed]
        window.sort(key=lambda o: o.call)
        if len(window) == len(kept) or start <= earliest:
            return kept
        if fails(window):
            return window
        span *= 4
    return kept


@dataclass(frozen=True, kw_only=True)
class KeyResult:
    key: str
    ops: int
    status: str  # valid | invalid | unknown
    why: str = ""  # unknown: why the search was cut off
    witness: tuple[RegOp, ...] = ()  # invalid: a small non-linearizable subset
    seconds: float = 0.0


def check_registers(
    history: list[MaelstromOperation], budget: int = STATE_BUDGET, seconds: float = CHECK_SECONDS
) -> list[KeyResult]:
    """Each key's verdict, keys in order of first appearance; the searches of all keys together
    get `seconds`, and a key whose search runs past them is unknown."""
    deadline = time.monotonic() + seconds
    by_key: dict[str, list[RegOp]] = {}
    for op in history:
        if op.type == "invoke":
            continue
        found = register_op(op)
        if found is not None:
            by_key.setdefault(found[0], []).append(found[1])
    results = []
    for key, ops in by_key.items():
        started = time.monotonic()
        try:
            ok = decide(ops, budget, deadline)
        except CutOff as exc:
            seconds = time.monotonic() - started
            results.append(KeyResult(key=key, ops=len(ops), status="unknown", why=str(exc), seconds=seconds))
            continue
        witness = () if ok else tuple(explain(ops))
        status = "valid" if ok else "invalid"
        seconds = time.monotonic() - started
        results.append(KeyResult(key=key, ops=len(ops), status=status, witness=witness, seconds=seconds))
    return results
