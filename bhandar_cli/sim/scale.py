"""`bhandar sim scale`: what gossip, failure detection, anti-entropy and hints cost as a cluster grows.

For each cluster size the real core runs on a simulated cluster (sim/sim_cluster.py, every node with
gossip, phi detectors, anti-entropy and hinted handoff as in production), through these phases:

1. boot, wait until every node has heard of every other, create a keyspace (N=3) and write
   `KEYS_PER_NODE` keys per node, so every node holds about the same data at every size;
2. count every message for `WINDOW` simulated seconds: gossip (syn, ack, token pushes) and
   anti-entropy (Merkle probes, fetches, pushes), per node per second, their bytes measured by
   encoding a sample of each kind as the wire does (CBOR of `core/wire.py`'s form);
3. crash one node and time when each live node sees it down (failure detection, p50 and p99);
4. start a new node and time until every live node knows it (a membership change spreading);
5. crash every node of one zone, write `OUTAGE_WRITES` keys, and count the hints piled up.

Beside each size, the all-to-all heartbeat baseline from the same run: every node sends its own
heartbeat (one member's state, encoded here) to each of the n - 1 others every gossip interval.
Repair age is the background round of core/repair/repair_schedule.py: every range shared with one
peer per repair interval, so a range is compared again after (peers it shares ranges with) intervals.

Everything depends on the seed only; nothing here reads the wall clock.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from random import Random
from typing import Any

import cbor2

from bhandar_cli.core import to_wire
from bhandar_cli.core.membership import GossipAck, GossipSyn, GossipTokens, MemberState
from bhandar_cli.core.model import KeyspaceDef, NodeConfig
from bhandar_cli.core.protocol import Failure, KeyspaceRequest, PutRequest
from bhandar_cli.core.repair import (
    RepairDone,
    RepairFetch,
    RepairFetchReply,
    RepairProbe,
    RepairProbeReply,
    RepairPush,
)
from bhandar_cli.host import next_node_name
from bhandar_cli.sim.sim_cluster import SimCluster

DEFAULT_SIZES = (24, 48, 120, 240)
DEFAULT_SEED = 18
ZONES = 3
VNODES = 8
REPLICAS = 3
KEYS_PER_NODE = 20
WINDOW = 10.0  # simulated seconds of traffic counted
POLL = 0.05  # simulated seconds between two looks at who has noticed a change
GIVE_UP = 60.0  # simulated seconds a phase may take at most
OUTAGE_WRITES = 300
SAMPLES = 40  # messages of each kind encoded to measure their size
KEYSPACE = "scale"
GOSSIP = (GossipSyn, GossipAck, GossipTokens)
REPAIR = (
    RepairProbe,
    RepairProbeReply,
    RepairFetch,
    RepairFetchReply,
    RepairPush,
    RepairDone,
)


@dataclass
class Traffic:
    """Messages counted by kind while `on` is set, and a sample of each kind's encoded sizes."""

    on: bool = False
    count: Counter[type] = field(default_factory=Counter)
    sizes: dict[type, list[int]] = field(default_factory=dict)

    def see(self, msg: Any) -> None:
        kind = msg.__class__
        if not self.on or not (kind in GOSSIP or kind in REPAIR):
            return
        self.count[kind] += 1
        sample = self.sizes.setdefault(kind, [])
        if len(sample) < SAMPLES:
            sample.append(encoded_size(msg))

    def totals(self, kinds: tuple[type, ...]) -> tuple[int, float]:
        """(messages, bytes) of these kinds, bytes from each kind's mean sampled size."""
        messages = sum(self.count[k] for k in kinds)
        size = sum(self.count[k] * statistics.fmean(self.sizes[k]) for k in kinds if self.sizes.get(k))
        return messages, size


def encoded_size(msg: Any) -> int:
    """Bytes of a message's body on the wire (its CBOR, without the frame's few header bytes)."""
    return len(cbor2.dumps(to_wire(msg)))


def run_scale(
    sizes: tuple[int, ...], seed: int, on_size: Callable[[int], None] | None = None
) -> dict[str, Any]:
    """The table: one row per cluster size."""
    config = NodeConfig()
    rows = []
    for n in sizes:
        if on_size is not None:
            on_size(n)
        rows.append(_one_size(n, seed, config))
    return {
        "seed": seed,
        "gossip_interval_s": config.gossip_interval,
        "gossip_fanout": config.gossip_fanout,
        "repair_interval_s": config.repair_interval,
        "replicas": REPLICAS,
        "zones": ZONES,
        "vnodes": VNODES,
        "window_s": WINDOW,
        "rows": rows,
    }


def _one_size(n: int, seed: int, config: NodeConfig) -> dict[str, Any]:
    cluster = SimCluster(seed=seed * 1000 + n, nodes=n, zones=ZONES, vnodes=VNODES, config=config)
    traffic = Traffic()
    for host in cluster.hosts.values():
        _count_sends(host, traffic)
    _wait(cluster, cluster.membership_settled, "the nodes to find each other")
    first = next(iter(cluster.hosts))
    created = cluster.call(first, KeyspaceRequest(cluster.new_rid(), KeyspaceDef(KEYSPACE, "lww", REPLICAS)))
    if isinstance(created, Failure):
        raise RuntimeError(f"could not create keyspace {KEYSPACE}: {created.error}")
    rng = Random(seed)
    _write(cluster, rng, n * KEYS_PER_NODE, 1.0, "key")
    cluster.run_for(3.0)

    traffic.on = True
    cluster.run_for(WINDOW)
    traffic.on = False
    gossip_messages, gossip_bytes = traffic.totals(GOSSIP)
    repair_messages, repair_bytes = traffic.totals(REPAIR)
    per = n * WINDOW  # node-seconds
    info = {name: h.node.info(cluster.now) for name, h in cluster.hosts.items() if h.node is not None}
    held = statistics.fmean(i["keys"] for i in info.values()) if info else 0.0
    ranges = statistics.fmean(i["repair"]["ranges"] for i in info.values()) if info else 0.0
    peers = _repair_peers(cluster)
    # What an all-to-all heartbeat carries: the sender's own state (its tokens, zone, address).
    own = MemberState(
        first, cluster.ring.zones[first], tuple(cluster.ring.tokens_by_node()[first]), "normal", 1, 99
    )
    heartbeat = encoded_size(GossipSyn((own,)))

    detection = _detection(cluster)
    spread = _membership_change(cluster)
    hints = _zone_outage(cluster, rng, detection_wait=config.detection_bound())
    baseline_messages = (n - 1) / config.gossip_interval
    hour = 3600.0
    return {
        "nodes": n,
        "gossip_messages_per_node_s": round(gossip_messages / per, 2),
        "gossip_bytes_per_node_s": round(gossip_bytes / per),
        "all_to_all_messages_per_node_s": round(baseline_messages, 2),
        "all_to_all_bytes_per_node_s": round(baseline_messages * heartbeat),
        "heartbeat_bytes": heartbeat,
        "gossip_syn_bytes": round(statistics.fmean(traffic.sizes.get(GossipSyn) or [0])),
        "detect_p50_s": detection["p50"],
        "detect_p99_s": detection["p99"],
        "detected_by": detection["by"],
        "membership_p50_s": spread["p50"],
        "membership_all_s": spread["all"],
        "keys_held_per_node": round(held, 1),
        "repair_messages_per_node_h": round(repair_messages / per * hour),
        "repair_bytes_per_node_h": round(repair_bytes / per * hour),
        "repair_ranges_per_node": round(ranges, 1),
        "repair_peers_per_node": round(peers, 1),
        "repair_age_s": round(peers * config.repair_interval, 1),
        **hints,
    }


def _repair_peers(cluster: SimCluster) -> float:
    """How many peers a node shares ranges with (a background round visits each once), on average."""
    ring = cluster.ring_view()
    shared: dict[str, set[str]] = {name: set() for name in ring.tokens_by_node()}
    for rng in ring.ranges():
        replicas = ring.preference_list(rng.hi, REPLICAS)
        for name in replicas:
            shared[name].update(replicas)
    return statistics.fmean(len(peers) - 1 for peers in shared.values()) if shared else 0.0


def _count_sends(host: Any, traffic: Traffic) -> None:
    send = host.send

    def counted(src: str, dst: str, msg: Any) -> None:
        traffic.see(msg)
        send(src, dst, msg)

    host.send = counted


def _wait(cluster: SimCluster, condition: Callable[[], bool], what: str) -> float:
    """Run until `condition()` holds, looking every POLL seconds; the seconds it took."""
    start = cluster.now
    while not condition():
        if cluster.now - start > GIVE_UP:
            raise RuntimeError(f"gave up waiting for {what} after {GIVE_UP:g} simulated seconds")
        cluster.run_for(POLL)
    return cluster.now - start


def _write(cluster: SimCluster, rng: Random, count: int, over: float, prefix: str) -> None:
    """`count` puts through random live nodes, spread evenly over `over` seconds."""
    live = [name for name, h in cluster.hosts.items() if h.alive]
    for i in range(count):
        request = PutRequest(cluster.new_rid(), KEYSPACE, f"{prefix}{i}", b"v", "application/json", None)
        cluster.submit(rng.choice(live), request, lambda _result: None, delay=over * i / max(count, 1))
    cluster.run_for(over)


def _percentiles(times: list[float]) -> dict[str, Any]:
    if not times:
        return {"p50": None, "p99": None, "all": None}
    ordered = sorted(times)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)

    return {"p50": at(0.5), "p99": at(0.99), "all": round(ordered[-1], 3)}


def _observers(cluster: SimCluster, skip: str) -> list[str]:
    return [name for name, h in cluster.hosts.items() if h.alive and name != skip]


def _detection(cluster: SimCluster) -> dict[str, Any]:
    """Crash one node; seconds until each live node sees it down."""
    victim = cluster.members[1]
    cluster.kill(victim)
    start = cluster.now
    seen: dict[str, float] = {}
    observers = _observers(cluster, victim)

    def everyone() -> bool:
        for name in observers:
            node = cluster.hosts[name].node
            if name not in seen and node is not None and not node.is_up(victim, cluster.now):
                seen[name] = cluster.now - start
        return len(seen) == len(observers)

    _wait(cluster, everyone, f"every node to see {victim} down")
    return {**_percentiles(list(seen.values())), "by": len(seen)}


def _membership_change(cluster: SimCluster) -> dict[str, Any]:
    """Start a new node; seconds until each live node has it in its membership table."""
    name = next_node_name(list(cluster.hosts))
    cluster.add_node(name, "z1")
    start = cluster.now
    seen: dict[str, float] = {}
    observers = _observers(cluster, name)

    def everyone() -> bool:
        for other in observers:
            if other not in seen and cluster.status_of(name, other) != "unknown":
                seen[other] = cluster.now - start
        return len(seen) == len(observers)

    _wait(cluster, everyone, f"every node to learn of {name}")
    return _percentiles(list(seen.values()))


def _zone_outage(cluster: SimCluster, rng: Random, detection_wait: float) -> dict[str, Any]:
    """Crash every node of zone z3, wait until the others notice, write; the hints they hold."""
    zone = f"z{ZONES}"
    down = [name for name in cluster.members if cluster.ring.zones.get(name) == zone]
    for name in down:
        cluster.kill(name)
    cluster.run_for(detection_wait)
    _write(cluster, rng, OUTAGE_WRITES, 2.0, "outage")
    cluster.run_for(2.0)
    held = [
        h.node.info(cluster.now, counts=False)["hints"] for h in cluster.hosts.values() if h.node is not None
    ]
    return {
        "outage_zone_nodes": len(down),
        "outage_writes": OUTAGE_WRITES,
        "hints_total": sum(held),
        "hints_max_per_node": max(held, default=0),
        "hints_mean_per_live_node": round(statistics.fmean(held), 2) if held else 0.0,
    }


def render_scale(result: dict[str, Any]) -> str:
    """The table as text: gossip beside its all-to-all baseline, then times, repair and hints."""
    r0 = result
    head = (
        f"gossip every {r0['gossip_interval_s']:g} s to {r0['gossip_fanout']} peers; "
        f"N={r0['replicas']}, {r0['zones']} zones, {r0['vnodes']} vnodes; "
        f"traffic counted over {r0['window_s']:g} s (seed {r0['seed']})\n"
    )
    cols = (
        f"{'nodes':>5}  {'gossip msg/s':>12} {'all-to-all':>10}  {'gossip B/s':>10} {'all-to-all':>10}  "
        f"{'detect p50/p99':>14}  {'membership p50/all':>18}  {'keys/node':>9} {'repair KB/h':>11} "
        f"{'repair age':>10}  {'zone-outage hints':>17}\n"
    )
    lines = [head, cols]
    for r in result["rows"]:
        detect = _pair(r["detect_p50_s"], r["detect_p99_s"])
        spread = _pair(r["membership_p50_s"], r["membership_all_s"])
        lines.append(
            f"{r['nodes']:>5}  {r['gossip_messages_per_node_s']:>12.2f} "
            f"{r['all_to_all_messages_per_node_s']:>10.2f}  "
            f"{r['gossip_bytes_per_node_s']:>10,} {r['all_to_all_bytes_per_node_s']:>10,}  "
            f"{detect:>14}  {spread:>18}  "
            f"{r['keys_held_per_node']:>9.1f} {r['repair_bytes_per_node_h'] / 1000:>11,.1f} "
            f"{r['repair_age_s']:>9.0f}s  {r['hints_total']:>7} (max {r['hints_max_per_node']}/node)\n"
        )
    writes = result["rows"][0]["outage_writes"] if result["rows"] else 0
    lines.append(
        "per node: gossip and all-to-all heartbeats per second (the baseline: n-1 heartbeats of one\n"
        "member's state every interval); detection: seconds until live nodes see a crashed node down;\n"
        "membership: seconds until they know a new node; repair: anti-entropy bytes per node per hour\n"
        "and how long a range waits between two comparisons; hints: held after one zone is down and\n"
        f"{writes} writes.\n"
    )
    return "".join(lines)


def _pair(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None else f"{a:.2f}/{b:.2f} s"
