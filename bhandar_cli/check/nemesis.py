"""The faults of a check, drawn from its seed before it starts: what, when, to whom.

Each kind named with `--nemesis` has its own schedule (kinds overlap, as Jepsen composes
nemeses): a fault starts, lasts for part of `interval`, ends, and after a pause the next one of
that kind starts, until the time limit, when every fault ends before the final reads.

- partition: the nodes split in two random halves, or one node cut off from the rest;
- kill: one node SIGKILLed, restarted when the fault ends (it gets `init` again);
- pause: one node SIGSTOPped, SIGCONTed when the fault ends;
- slow: one node's links (both ways) delayed by 50-200 ms;
- loss: 10-40% of node-to-node messages lost;
- duplicate: 20-50% of node-to-node messages delivered twice (clients' requests too only with
  `--duplicate-clients`: Maelstrom never duplicates them).

`scenario` gives the fixed plans of `--checklist`. A plan is plain data: the command prints it
and puts it in the JSON, so a run can be read and repeated.
"""

from __future__ import annotations

from dataclasses import dataclass
from random import Random

from bhandar_cli.check.catalog import KINDS, SCENARIOS

__all__ = ["KINDS", "SCENARIOS", "Fault", "draw", "scenario"]


@dataclass(frozen=True, slots=True)
class Fault:
    kind: str
    start: float  # seconds since the workload began
    end: float
    nodes: tuple[str, ...] = ()  # whom it strikes (partition: one side)
    amount: float = 0.0  # loss or duplicate rate; slow: seconds added

    def text(self, everyone: list[str]) -> str:
        when = f"{self.start:.2f}-{self.end:.2f} s"
        if self.kind == "partition":
            rest = [n for n in everyone if n not in self.nodes]
            return f"{when} partition {' '.join(self.nodes)} | {' '.join(rest)}"
        if self.kind in ("loss", "duplicate"):
            return f"{when} {self.kind} {self.amount:.0%}"
        if self.kind == "slow":
            return f"{when} slow {' '.join(self.nodes)} (+{self.amount * 1000:.0f} ms)"
        return f"{when} {self.kind} {' '.join(self.nodes)}"

    def plain(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "start": self.start,
            "end": self.end,
            "nodes": list(self.nodes),
            "amount": self.amount,
        }


def draw(rng: Random, kinds: list[str], nodes: list[str], time_limit: float, interval: float) -> list[Fault]:
    """The faults of a run, each kind on its own schedule, all over by `time_limit`."""
    faults: list[Fault] = []
    for kind in kinds:
        kind_rng = Random(rng.getrandbits(64))
        t = interval * kind_rng.uniform(0.2, 0.6)
        while t < time_limit * 0.95:
            end = min(t + interval * kind_rng.uniform(0.4, 1.0), time_limit)
            faults.append(_fault(kind_rng, kind, nodes, t, end))
            t = end + interval * kind_rng.uniform(0.3, 1.0)
    return sorted(faults, key=lambda f: (f.start, f.kind))


def _fault(rng: Random, kind: str, nodes: list[str], start: float, end: float) -> Fault:
    if kind == "partition":
        if len(nodes) > 2 and rng.random() < 0.5:
            side: tuple[str, ...] = (rng.choice(nodes),)
        else:
            shuffled = list(nodes)
            rng.shuffle(shuffled)
            side = tuple(sorted(shuffled[: max(1, len(nodes) // 2)], key=nodes.index))
        return Fault(kind, start, end, side)
    if kind == "loss":
        return Fault(kind, start, end, (), round(rng.uniform(0.1, 0.4), 2))
    if kind == "duplicate":
        return Fault(kind, start, end, (), round(rng.uniform(0.2, 0.5), 2))
    if kind == "slow":
        return Fault(kind, start, end, (rng.choice(nodes),), round(rng.uniform(0.05, 0.2), 3))
    return Fault(kind, start, end, (rng.choice(nodes),))


# --- the checklist ---------------------------------------------------------------------------------


def scenario(name: str, nodes: list[str], time_limit: float) -> list[Fault]:
    """The fixed faults of one checklist scenario (the last nodes are the ones struck)."""
    t = time_limit
    a, b = 0.1 * t, 0.9 * t
    n = len(nodes)
    minority = tuple(nodes[n - (n - 1) // 2 :]) if n > 1 else ()
    if name == "no fault":
        return []
    if name == "one node down":
        return [Fault("kill", a, b, (nodes[-1],))]
    if name == "two nodes down":
        return [Fault("kill", a, b, (nodes[-1],)), Fault("kill", a, b, (nodes[-2],))] if n > 2 else []
    if name == "minority partition":
        return [Fault("partition", a, b, minority)] if minority else []
    if name == "slow replica":
        return [Fault("slow", a, b, (nodes[-1],), 0.1)]
    if name == "hint holder killed":
        # While a minority is cut off, the majority's fallbacks hold its writes (hinted handoff);
        # one of them dies before the partition heals and comes back after.
        if not minority or n < 3:
            return []
        return [Fault("partition", a, 0.6 * t, minority), Fault("kill", 0.5 * t, 0.7 * t, (nodes[0],))]
    if name == "restarts":
        span = (b - a) / n
        return [
            Fault("kill", a + i * span, a + i * span + span * 0.5, (node,)) for i, node in enumerate(nodes)
        ]
    raise ValueError(f"unknown scenario {name!r}")
