"""The ministore experiment run on the real store (`bhandar chaos --scenario ministore`).

The ministore teaching simulation (`bhandar sim ministore`) models a store in a few lines; this
module runs the same experiment against the real node core in the simulator: 5 nodes, 8 vnodes each, N = 3,
W = R = 2 (QUORUM), 300 keys, 8000 requests, one request per simulated millisecond (request i is
sent at i ms), half puts and half gets on random keys. Node D is killed at 2000 ms and E at 4000 ms
(memory lost, store kept); both restart at 6000 ms. Nobody tells the other nodes: the ping
detector notices (pings every 100 ms, down after 300 ms of silence, about the seed's DETECT of 300
operations) and routing follows what it believes.

Three modes, as in the seed: a strict quorum; a sloppy quorum without hinted handoff
(NodeConfig(hinted_handoff=False): fallbacks still store hinted copies but never hand them back);
a sloppy quorum with hints. A client sends each request to a random live node (a dead node refuses
the connection at once) and gives up after 2.5 s. Puts carry the context of the client's last
successful read of the key. A stale read is a successful read whose answer lacks the latest
acknowledged put of its key (see `checker.count_stale_reads`).

Expect the seed's shape (strict loses availability, sloppy keeps it, hints cut stale reads), not
its digits: this store also repairs stale replicas on reads, and its detector takes time.
"""

from __future__ import annotations

from dataclasses import dataclass
from random import Random
from typing import Any

from bhandar_cli.core.model import JSON, KeyspaceDef, NodeConfig, Versioned, context_of
from bhandar_cli.core.protocol import GetRequest, KeyspaceRequest, PutRequest, Result
from bhandar_cli.sim import History, Operation, SimCluster
from bhandar_cli.sim.checker import count_stale_reads

MODES: tuple[str, ...] = ("strict", "sloppy, no handoff", "sloppy + hints")
DEFAULT_SEED = 54
DEFAULT_REQUESTS = 8000
KEYS = 300
# node -> (first ms down, first ms back up), as in the seed
DOWN: dict[str, tuple[int, int]] = {"D": (2000, 6000), "E": (4000, 6000)}
KEYSPACE = "ministore"
CLIENT_TIMEOUT = 2.5
SETTLE = 3.0  # simulated seconds after the last request for answers and hand-offs to finish


@dataclass(frozen=True, slots=True)
class ModeResult:
    mode: str
    ok: int
    tries: int
    reads: int
    stale_reads: int
    hints_stored: int
    hints_delivered: int
    read_repairs: int

    @property
    def availability(self) -> float:
        return self.ok / self.tries if self.tries else 1.0


@dataclass(frozen=True, slots=True)
class MinistoreScenario:
    seed: int
    requests: int
    keys: int
    modes: tuple[ModeResult, ...]


def run_ministore_scenario(
    seed: int = DEFAULT_SEED, requests: int = DEFAULT_REQUESTS, keys: int = KEYS
) -> MinistoreScenario:
    return MinistoreScenario(
        seed, requests, keys, tuple(_run_mode(mode, seed, requests, keys) for mode in MODES)
    )


def _run_mode(mode: str, seed: int, requests: int, keys: int) -> ModeResult:
    config = NodeConfig(
        hinted_handoff=mode == "sloppy + hints",
        liveness="ping",  # the seed models detection as a fixed delay (DETECT = 300 requests)
        ping_interval=0.1,
        down_after=0.3,
        request_timeout=1.0,
    )
    cluster = SimCluster(seed=seed, nodes=5, zones=5, vnodes=8, config=config)
    ks = KeyspaceDef(KEYSPACE, "siblings", 3, "strict" if mode == "strict" else "sloppy")
    cluster.call("A", KeyspaceRequest(cluster.new_rid(), ks))
    cluster.run_for(1.0)
    start = cluster.now
    loop = cluster.loop
    for node, (down_ms, up_ms) in DOWN.items():
        loop.call_at(start + down_ms / 1000.0, cluster.kill, node)
        loop.call_at(start + up_ms / 1000.0, cluster.revive, node)
    client = _MinistoreClient(cluster, Random(seed), keys)
    for i in range(requests):
        loop.call_at(start + i / 1000.0, client.request, i)
    cluster.run_for(requests / 1000.0 + SETTLE)
    metrics = cluster.metrics()
    history = client.history
    return ModeResult(
        mode=mode,
        ok=sum(1 for op in history.ops if op.ok),
        tries=len(history.ops),
        reads=sum(1 for op in history.ops if op.kind == "get" and op.ok),
        stale_reads=count_stale_reads(history, {KEYSPACE: ks}),
        hints_stored=metrics.hints_stored,
        hints_delivered=metrics.hints_delivered,
        read_repairs=metrics.read_repairs,
    )


class _MinistoreClient:
    """One open-loop client: it sends each request on time, whether or not earlier ones answered."""

    def __init__(self, cluster: SimCluster, rng: Random, keys: int) -> None:
        self.cluster = cluster
        self.rng = rng
        self.keys = keys
        self.names = list(cluster.hosts)
        self.history = History()
        self.contexts: dict[str, dict[str, int]] = {}

    def request(self, i: int) -> None:
        cluster, rng = self.cluster, self.rng
        key = f"k{int(rng.random() * self.keys)}"
        is_put = rng.random() < 0.5
        via = self.names[int(rng.random() * len(self.names))]
        if not cluster.is_alive(via):  # connection refused: try a live node
            alive = [n for n in self.names if cluster.is_alive(n)]
            via = alive[int(rng.random() * len(alive))]
        now = cluster.now
        rid = cluster.new_rid()
        if is_put:
            value = f'"v{i}"'.encode()
            context = self.contexts.get(key)
            op = self.history.invoke(now, 0, "put", KEYSPACE, key, "QUORUM", value, context)
            request: PutRequest | GetRequest = PutRequest(rid, KEYSPACE, key, value, JSON, context, "QUORUM")
        else:
            op = self.history.invoke(now, 0, "get", KEYSPACE, key, "QUORUM")
            request = GetRequest(rid, KEYSPACE, key, "QUORUM")
        cluster.submit(via, request, lambda result: self._answered(op, result))
        cluster.loop.call_later(CLIENT_TIMEOUT, self._give_up, op, rid)

    def _answered(self, op: Operation, result: Result) -> None:
        History.complete(op, self.cluster.now, result)
        if op.ok and op.kind == "get" and isinstance(op.record, Versioned):
            self.contexts[op.key] = context_of(op.record.siblings)

    def _give_up(self, op: Operation, rid: int) -> None:
        if op.outcome == "pending":
            self.cluster.forget(rid)
            History.fail(op, self.cluster.now, "timeout", "client_timeout")


def render_ministore_scenario(result: MinistoreScenario) -> str:
    """The seed's columns, one line per mode, plus this store's read repairs."""
    lines = [
        f"ministore on the real store: seed {result.seed}, {result.requests} requests, {result.keys} keys, "
        "5 nodes, N=3, W=R=2; D down 2000-5999 ms, E down 4000-5999 ms",
    ]
    for m in result.modes:
        lines.append(
            m.mode.ljust(19)
            + f"availability {100.0 * m.availability:.2f}%  stale reads {m.stale_reads}"
            + f"  hints stored {m.hints_stored}  delivered {m.hints_delivered}  read repairs {m.read_repairs}"
        )
    lines.append(
        "(hints stored counts hinted writes; one delivery hands over every write merged into a key's hint)"
    )
    return "\n".join(lines) + "\n"


def ministore_scenario_json(result: MinistoreScenario) -> dict[str, Any]:
    return {
        "cmd": "chaos",
        "scenario": "ministore",
        "seed": result.seed,
        "requests": result.requests,
        "keys": result.keys,
        "modes": [
            {
                "mode": m.mode,
                "ok": m.ok,
                "tries": m.tries,
                "availability": round(m.availability, 6),
                "reads": m.reads,
                "stale_reads": m.stale_reads,
                "hints_stored": m.hints_stored,
                "hints_delivered": m.hints_delivered,
                "read_repairs": m.read_repairs,
            }
            for m in result.modes
        ],
    }
