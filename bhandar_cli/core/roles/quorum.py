"""Quorum arithmetic: which replicas a request goes to, and why a request cannot get enough of them.

`plan_replicas` is the sloppy/strict choice: a strict quorum uses only the N home replicas that are
up; a sloppy quorum replaces each home replica believed down by the next healthy node on the ring
walk, which stores the write as a hint naming the home replica (Dynamo's hinted handoff).

While a range moves (a join or a decommission), the replicas the *future* ring gives a key that the
current one does not are its pending replicas: every write goes to them too, and one believed down
gets a hint from the coordinator instead. `write_quorum` counts each pending replica, up or down,
in the acknowledgements a write needs, as Cassandra does: with W + P acks from the current and
pending replicas, where at most P current replicas lose the key when the movement ends, the write
is on at least W replicas of whichever ring wins, and a read at R (R + W > N) finds it in either.
Counting only the pending replicas that are up would let a write at ONE rest on the one current
replica that the movement drops (found by `bhandar chaos --seed 901936 --ops 8000`: the joining
node was down and only the dropped coordinator had the write). A down pending replica's hint
does not count: like any hint it is not a replica's copy. The price is availability while a
pending replica is down: ALL then needs more live replicas than exist, so it is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from bhandar_cli.core.membership import Ring
from bhandar_cli.core.model import KeyspaceDef, required
from bhandar_cli.core.protocol import Failure


@dataclass(frozen=True, kw_only=True, slots=True)
class Plan:
    home: tuple[str, ...]  # the N home replicas (preference list)
    targets: tuple[str, ...]  # nodes to contact: up home replicas, then fallbacks
    hint_for: dict[str, str]  # fallback -> the down home replica it stands in for
    down: tuple[str, ...]  # home replicas believed down
    pending: tuple[str, ...] = ()  # future replicas that are up, during a join or decommission
    pending_down: tuple[str, ...] = ()  # future replicas believed down: the coordinator hints them


def plan_replicas(
    ring: Ring, token: int, n: int, mode: str, is_up: Callable[[str], bool], future: Ring | None = None
) -> Plan:
    home = ring.preference_list(token, n)
    up_home = tuple(h for h in home if is_up(h))
    down = tuple(h for h in home if h not in up_home)
    if not down or mode == "strict":
        plan = Plan(home=home, targets=up_home, hint_for={}, down=down)
    else:
        fallbacks = [f for f in ring.fallbacks(token, n) if is_up(f)]
        hint_for = dict(zip(fallbacks, down, strict=False))
        plan = Plan(home=home, targets=up_home + tuple(hint_for), hint_for=hint_for, down=down)
    if future is None:
        return plan
    # A future replica already among the targets (a fallback) gets the write anyway.
    new = [p for p in future.preference_list(token, n) if p not in home and p not in plan.targets]
    if not new:
        return plan
    pending = tuple(p for p in new if is_up(p))
    pending_down = tuple(p for p in new if p not in pending)
    return replace(plan, pending=pending, pending_down=pending_down)


def write_quorum(plan: Plan, level: str, n: int) -> int:
    """Acknowledgements a write at `level` needs: the level's count, plus one per pending replica
    (up or down; see the module docstring for why)."""
    return required(level, n) + len(plan.pending) + len(plan.pending_down)


def unavailable(coordinator: str, ks: KeyspaceDef, plan: Plan, level: str, write: bool = False) -> Failure:
    """The failure of a request whose plan reaches fewer replicas than it needs (a write counts
    its pending replicas, a read does not)."""
    pending = len(plan.pending) + len(plan.pending_down) if write else 0
    needed = required(level, ks.n) + pending
    reachable = len(plan.targets) + (len(plan.pending) if write else 0)
    down = ", ".join(plan.down) or "none"
    mode = "strict quorum: only home replicas count" if ks.quorum == "strict" else "no healthy fallback"
    moving = ""
    if pending:
        moving = f"; {pending} pending replica(s) of a range movement count too"
        if plan.pending_down:
            moving += f", down: {', '.join(plan.pending_down)}"
    return Failure(
        "unavailable",
        f"{reachable} of {ks.n + pending} replicas reachable, {level} needs {needed} "
        f"(home replicas down: {down}; {mode}{moving})",
        answered=reachable,
        needed=needed,
        coordinator=coordinator,
    )
