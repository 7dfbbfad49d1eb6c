"""What a node does when its store reports corruption: count it, show it, repair it at once.

The store finds the damage (storage/damage.py) and says which keyspaces may have lost records
(`StoreDamage`); this role counts each by kind (`metrics.corruptions`, exported as
`bhandar_corruptions_total{kind}`), keeps the recent ones as node conditions for `status`, and
asks anti-entropy to compare every range of those keyspaces this node replicates with the other
replicas now, so the lost records come back from them without waiting for the background round.
(Keys hash to tokens, so a lost run of keys is spread over every range of its keyspace.)
"""

from __future__ import annotations

from collections import deque

from bhandar_cli.core.model import NodeMetrics, StoreDamage, moment
from bhandar_cli.core.protocol import Effect
from bhandar_cli.core.repair.antientropy import AntiEntropy

KEPT = 20  # conditions shown in status: the most recent ones


class DamageRepair:
    def __init__(self, anti_entropy: AntiEntropy, metrics: NodeMetrics) -> None:
        self.anti_entropy = anti_entropy
        self.metrics = metrics
        self.conditions: deque[str] = deque(maxlen=KEPT)

    def on_damage(self, now: float, damage: list[StoreDamage]) -> list[Effect]:
        lost: set[str] = set()
        anywhere = False
        for d in damage:
            self.metrics.corruptions[d.kind] = self.metrics.corruptions.get(d.kind, 0) + 1
            if d.keyspaces is None:
                anywhere = True
            else:
                lost.update(d.keyspaces)
            repair = "" if d.keyspaces == () else "; repairing from replicas"
            self.conditions.append(f"storage corruption found at {moment(now)}: {d.message}{repair}")
        ranges = [r for r in self.anti_entropy.replicated_ranges() if anywhere or r[0].name in lost]
        return self.anti_entropy.repair_ranges(now, ranges) if ranges else []
