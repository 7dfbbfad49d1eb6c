"""Quorum arithmetic: which replicas a request goes to, and the state of one request in flight.

`plan_replicas` is the sloppy/strict choice: a strict quorum uses only the N home replicas that are
up; a sloppy quorum replaces each home replica believed down by the next healthy node on the ring
walk, which stores the write as a hint naming the home replica (Dynamo's hinted handoff).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from bhandar_cli.core.records import Record
from bhandar_cli.core.ring import Ring


@dataclass(frozen=True, slots=True)
class Plan:
    home: tuple[str, ...]  # the N home replicas (preference list)
    targets: tuple[str, ...]  # nodes to contact: up home replicas, then fallbacks
    hint_for: dict[str, str]  # fallback -> the down home replica it stands in for
    down: tuple[str, ...]  # home replicas believed down
    pending: tuple[str, ...] = ()  # future replicas during a join or decommission (writes only)


def plan_replicas(
    ring: Ring, token: int, n: int, mode: str, is_up: Callable[[str], bool], future: Ring | None = None
) -> Plan:
    home = ring.preference_list(token, n)
    up_home = tuple(h for h in home if is_up(h))
    down = tuple(h for h in home if h not in up_home)
    if not down or mode == "strict":
        plan = Plan(home, up_home, {}, down)
    else:
        fallbacks = [f for f in ring.fallbacks(token, n) if is_up(f)]
        hint_for = dict(zip(fallbacks, down, strict=False))
        plan = Plan(home, up_home + tuple(hint_for), hint_for, down)
    if future is None:
        return plan
    # During a range movement the future replicas get every write too, and (as in Cassandra) each
    # one that is up adds to the acknowledgements needed, so the write is still on W replicas of
    # whichever ring wins.
    pending = tuple(p for p in future.preference_list(token, n) if p not in plan.targets and is_up(p))
    return Plan(plan.home, plan.targets, plan.hint_for, plan.down, pending) if pending else plan


@dataclass(slots=True)
class Op:
    """One request this node coordinates (or one internal exchange it waits on)."""

    kind: str  # put, delete, get, incr, forward, handoff, repair
    rid: int  # the client request id to answer (0 for internal ops)
    origin: str | None  # the node that forwarded the request to us, None for a local client
    started: float
    deadline: float
    needed: int = 0
    level: str = "QUORUM"
    keyspace: str = ""
    key: str = ""
    targets: tuple[str, ...] = ()
    acks: set[str] = field(default_factory=set)
    failed: dict[str, str] = field(default_factory=dict)
    replies: dict[str, Record | None] = field(default_factory=dict)
    answered: bool = False
    trace: list[tuple[float, str]] | None = None
    result_value: int = 0  # incr: the value to report
    warnings: tuple[str, ...] = ()
    hinted: tuple[str, ...] = ()
    extra: object = None  # handoff: (target, keyspace, key, record); forward: origin request

    def note(self, now: float, text: str) -> None:
        if self.trace is not None:
            self.trace.append((round((now - self.started) * 1000.0, 3), text))
