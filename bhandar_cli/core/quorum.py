"""Quorum arithmetic: which replicas a request goes to, and why a request cannot get enough of them.

`plan_replicas` is the sloppy/strict choice: a strict quorum uses only the N home replicas that are
up; a sloppy quorum replaces each home replica believed down by the next healthy node on the ring
walk, which stores the write as a hint naming the home replica (Dynamo's hinted handoff).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bhandar_cli.core.config import KeyspaceDef, required
from bhandar_cli.core.messages import Failure
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


def unavailable(coordinator: str, ks: KeyspaceDef, plan: Plan, level: str) -> Failure:
    """The failure of a request whose plan reaches fewer replicas than `level` needs."""
    needed = required(level, ks.n)
    reachable = len(plan.targets)
    down = ", ".join(plan.down) or "none"
    mode = "strict quorum: only home replicas count" if ks.quorum == "strict" else "no healthy fallback"
    return Failure(
        "unavailable",
        f"{reachable} of {ks.n} replicas reachable, {level} needs {needed} "
        f"(home replicas down: {down}; {mode})",
        answered=reachable,
        needed=needed,
        coordinator=coordinator,
    )
