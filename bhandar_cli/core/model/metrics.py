"""Counters and latency histograms a node keeps: the seed's SLIs.

A client's data request is counted once, by the node it was sent to, when its answer goes out
(host/executor.py): by outcome ("ok" or the failure's error code), and if it succeeded, its latency
from its arrival at that node to its answer (after the sync its durability waits for). The success
ratio judges the service: input the store refuses (`CALLER_FAULTS`) is the client's error, counted
under its outcome but not as a request the service failed.

Latencies go into log-spaced buckets (about 2% wide), so histograms from many nodes merge exactly
and percentiles cost O(buckets), whatever the number of requests.

`METRICS` is the one table of what a node measures: each series' name, kind, help text, unit,
how the cluster view merges it across nodes, where the `metrics` view shows it and which `metrics
show=` part keeps it. A counter the node keeps is declared once, as a `NodeMetrics` field
(`counter(...)`), and its row is read from that field; the gauges a node's `info()` holds are
rows of their own. Merging, the Prometheus exposition (node/http/prometheus.py), the `metrics`
view (client/cluster_views.py), the REPL's `show=` parts and the docs' table all read `METRICS`.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from bhandar_cli.core.model.errors import REFUSED_INPUT

_BASE = 1.02
_LOG_BASE = math.log(_BASE)
_MIN_MS = 0.001

OK = "ok"  # the outcome of a request that succeeded; a failed one's is its error code
# Outcomes that are the client's fault, left out of the success ratio (the SLO's "total").
CALLER_FAULTS = REFUSED_INPUT


class Histogram:
    """Mergeable latency histogram in milliseconds."""

    __slots__ = ("buckets", "count", "max_ms", "total_ms")

    def __init__(self) -> None:
        self.buckets: Counter[int] = Counter()
        self.count = 0
        self.total_ms = 0.0
        self.max_ms = 0.0

    def record(self, ms: float) -> None:
        self.buckets[int(math.log(max(ms, _MIN_MS) / _MIN_MS) / _LOG_BASE)] += 1
        self.count += 1
        self.total_ms += ms
        if ms > self.max_ms:
            self.max_ms = ms

    def merge(self, other: Histogram) -> None:
        self.buckets.update(other.buckets)
        self.count += other.count
        self.total_ms += other.total_ms
        self.max_ms = max(self.max_ms, other.max_ms)

    def cumulative(self, edges_ms: list[float]) -> list[int]:
        """How many observations fall at or below each edge (ascending), exactly when every edge
        is a bucket edge (`bucket_edge`), as Prometheus histogram buckets count them."""
        counts = sorted(self.buckets.items())
        out: list[int] = []
        seen = 0
        i = 0
        for edge in edges_ms:
            while i < len(counts) and _MIN_MS * _BASE ** (counts[i][0] + 1) <= edge * (1 + 1e-9):
                seen += counts[i][1]
                i += 1
            out.append(seen)
        return out

    def percentile(self, p: float) -> float:
        """The bucket's upper edge at or above the p-th percentile (0 when empty)."""
        if not self.count:
            return 0.0
        rank = max(1, math.ceil(p / 100.0 * self.count))
        seen = 0
        for bucket in sorted(self.buckets):
            seen += self.buckets[bucket]
            if seen >= rank:
                return min(_MIN_MS * _BASE ** (bucket + 1), self.max_ms)
        return self.max_ms


def bucket_edge(ms: float) -> float:
    """The bucket edge nearest `ms`: a histogram's counts at such an edge are exact."""
    return _MIN_MS * _BASE ** round(math.log(ms / _MIN_MS) / _LOG_BASE)


@dataclass
class OpStats:
    """One (operation, level)'s requests: `count` those the success ratio judges (every outcome
    but the client's faults), `ok` those that succeeded, `failures` every other outcome by error
    code (the client's faults included), `latency` of those that succeeded."""

    count: int = 0
    ok: int = 0
    latency: Histogram = field(default_factory=Histogram)
    failures: dict[str, int] = field(default_factory=dict)

    def merge(self, other: OpStats) -> None:
        self.count += other.count
        self.ok += other.ok
        self.latency.merge(other.latency)
        for code, n in other.failures.items():
            self.failures[code] = self.failures.get(code, 0) + n

    def outcomes(self) -> dict[str, int]:
        """Requests by outcome: "ok" and each error code."""
        return {OK: self.ok, **self.failures}


class MetricKind(Enum):
    """A series' Prometheus type."""

    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"


class Merge(Enum):
    """How the cluster-wide `metrics` view combines the nodes' figures."""

    SUM = "summed"
    MAX = "the largest"
    PER_NODE = "per node"


# The parts `metrics show=PART` keeps (each row names its own; none: shown by show=all only).
OPS = "ops"
REPAIRS = "repairs"
STORAGE = "storage"
PARTS: tuple[str, ...] = (OPS, REPAIRS, STORAGE)


@dataclass(frozen=True, kw_only=True)
class Metric:
    """One row of the metrics table: a series a node exports, and where the views show it."""

    name: str  # the series is bhandar_<name> (a counter's samples end in _total)
    kind: MetricKind
    help: str
    unit: str
    merge: Merge = Merge.SUM
    labels: tuple[str, ...] = ()
    part: str | None = None  # the `metrics show=` part that keeps it
    view: tuple[str, ...] = ()  # its path in the `metrics` view (): not in the view
    # Its value on one node: from its counters and its info() (None: the request rows, which
    # NodeMetrics.ops holds by operation, level and outcome).
    read: Callable[[NodeMetrics, Mapping[str, Any]], Any] | None = None

    @property
    def series(self) -> str:
        """The name Prometheus shows."""
        return f"bhandar_{self.name}"


@dataclass(frozen=True, kw_only=True)
class _CounterSpec:
    """What a `NodeMetrics` field declares about its counter (its name is the field's)."""

    help: str
    unit: str
    part: str | None
    view: tuple[str, ...]
    label: str | None  # a counter by label (a dict field): the label's name


_SPEC = "metric"  # the key of a counter field's metadata


def counter(
    help: str, *, unit: str, part: str | None = None, view: tuple[str, ...] = (), label: str | None = None
) -> Any:
    """A `NodeMetrics` field that is a counter: 0 at start, summed across nodes; with `label`, a
    dict of counts by that label. (Typed Any: compiled code checks a default's type, and a
    dataclass field specifier is not the int it stands for.)"""
    spec = _CounterSpec(help=help, unit=unit, part=part, view=view, label=label)
    if label is not None:
        return field(default_factory=dict, metadata={_SPEC: spec})
    return field(default=0, metadata={_SPEC: spec})


@dataclass
class NodeMetrics:
    """Everything a node counts. `ops` is keyed by (operation, consistency level); each other
    field is a counter, declared here once with what the metrics table says of it."""

    ops: dict[tuple[str, str], OpStats] = field(default_factory=dict)
    read_repairs: int = counter(
        "Replicas repaired after reads.", unit="replicas", part=REPAIRS, view=("read_repairs",)
    )
    stale_reads: int = counter(
        "Reads that found a stale replica (the stale-read SLI).",
        unit="reads",
        part=REPAIRS,
        view=("stale_reads",),
    )
    hints_stored: int = counter(
        "Hints stored for down replicas.", unit="hints", part=REPAIRS, view=("hints", "stored")
    )
    hints_delivered: int = counter(
        "Hints handed off to their owners.", unit="hints", part=REPAIRS, view=("hints", "delivered")
    )
    hints_expired: int = counter(
        "Hints dropped for age.", unit="hints", part=REPAIRS, view=("hints", "expired")
    )
    hints_for_silent: int = counter(
        "Hints kept for home replicas that did not answer a write by its deadline.",
        unit="hints",
        part=REPAIRS,
        view=("hints", "for_silent"),
    )
    hints_refused: int = counter(
        "Hints refused because a queue was full.", unit="hints", part=REPAIRS, view=("hints", "refused")
    )
    coordinated: int = counter("Client requests this node coordinated.", unit="requests")
    replica_requests: int = counter("Reads and writes served as a replica.", unit="requests")
    forwarded: int = counter(
        "Requests forwarded to a replica.", unit="requests", part=REPAIRS, view=("forwarded",)
    )
    forward_fallbacks: int = counter(
        "Forwarded puts handed to another coordinator after a timeout.",
        unit="puts",
        part=REPAIRS,
        view=("forward_fallbacks",),
    )
    # Forwarded puts no coordinator stored under the exact dot minted for them: stored as a void
    # (refused by every coordinator), or left as a hint of the put (an unknown outcome).
    exact_dots_voided: int = counter(
        "Forwarded puts no coordinator took, stored as a void under their exact dot.", unit="puts"
    )
    exact_dots_left_as_hints: int = counter(
        "Forwarded puts whose coordinators went silent, left as a hint under their exact dot.",
        unit="puts",
    )
    repair_sessions: int = counter(
        "Anti-entropy range comparisons started.",
        unit="sessions",
        part=REPAIRS,
        view=("anti_entropy", "sessions"),
    )
    keys_repaired: int = counter(
        "Keys anti-entropy sent to a replica that lacked them.",
        unit="keys",
        part=REPAIRS,
        view=("anti_entropy", "keys_repaired"),
    )
    tombstones_reaped: int = counter(
        "Tombstones removed once every replica had them.",
        unit="tombstones",
        part=REPAIRS,
        view=("anti_entropy", "tombstones_reaped"),
    )
    values_expired: int = counter(
        "Values of ttl keyspaces turned into tombstones by expiry.", unit="values", view=("values_expired",)
    )
    sibling_limit_exceeded: int = counter(
        "Keys a merge took over the sibling limit (every sibling kept).",
        unit="keys",
        part=REPAIRS,
        view=("sibling_limit_exceeded",),
    )
    corruptions: dict[str, int] = counter(  # noqa: RUF009 (a field specifier: a fresh dict each)
        "Storage corruption found on its disk.", unit="findings", label="kind"
    )

    @property
    def requests(self) -> int:
        """Requests this node served: client requests it coordinated, reads and writes as a replica
        (the load per node)."""
        return self.coordinated + self.replica_requests

    def observe(self, op: str, level: str, outcome: str, ms: float) -> None:
        """One client request answered: `outcome` is OK or the failure's error code; `ms` its
        latency (recorded only for a success)."""
        stats = self.ops.get((op, level))
        if stats is None:
            stats = self.ops[(op, level)] = OpStats()
        if outcome == OK:
            stats.count += 1
            stats.ok += 1
            stats.latency.record(ms)
            return
        if outcome not in CALLER_FAULTS:
            stats.count += 1
        stats.failures[outcome] = stats.failures.get(outcome, 0) + 1

    def merge(self, other: NodeMetrics) -> None:
        """Add `other`'s counts to these (every counter the table declares)."""
        for key, stats in other.ops.items():
            self.ops.setdefault(key, OpStats()).merge(stats)
        for name in counter_names(type(self)):
            mine, theirs = getattr(self, name), getattr(other, name)
            if isinstance(mine, dict):
                for label, n in theirs.items():
                    mine[label] = mine.get(label, 0) + n
            else:
                setattr(self, name, mine + theirs)

    def view(self) -> dict[str, Any]:
        """The counters the `metrics` view shows, each at its path."""
        out: dict[str, Any] = {}
        for row in counter_rows(type(self)):
            if row.view and row.read is not None:
                place(out, row.view, row.read(self, {}))
        return out


def counter_names(kind: type[NodeMetrics]) -> list[str]:
    """The counter fields of a NodeMetrics class, in declaration order."""
    return [f.name for f in dataclasses.fields(kind) if _SPEC in f.metadata]


def counter_rows(kind: type[NodeMetrics]) -> list[Metric]:
    """The table's rows for the counters a NodeMetrics class declares."""
    rows: list[Metric] = []
    for f in dataclasses.fields(kind):
        spec = f.metadata.get(_SPEC)
        if isinstance(spec, _CounterSpec):
            rows.append(
                Metric(
                    name=f.name,
                    kind=MetricKind.COUNTER,
                    help=spec.help,
                    unit=spec.unit,
                    labels=() if spec.label is None else (spec.label,),
                    part=spec.part,
                    view=spec.view,
                    read=_field_reader(f.name),
                )
            )
    return rows


def _field_reader(name: str) -> Callable[[NodeMetrics, Mapping[str, Any]], Any]:
    return lambda metrics, info: getattr(metrics, name)


def place(view: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    """Put `value` at `path` in a nested view."""
    *parents, leaf = path
    for key in parents:
        view = view.setdefault(key, {})
    view[leaf] = value


def _storage(key: str) -> Callable[[NodeMetrics, Mapping[str, Any]], Any]:
    """A storage figure of info() (None on a node that keeps no storage engine)."""
    return lambda metrics, info: (info.get("storage") or {}).get(key)


def _storage_gauge(name: str, unit: str, help: str) -> Metric:
    """A gauge of the store's disk figures: per node, in `metrics show=storage`, read from info()."""
    return Metric(
        name=name,
        kind=MetricKind.GAUGE,
        help=help,
        unit=unit,
        merge=Merge.PER_NODE,
        part=STORAGE,
        view=(STORAGE,),
        read=_storage(name),
    )


def _repair(key: str) -> Callable[[NodeMetrics, Mapping[str, Any]], Any]:
    return lambda metrics, info: (info.get("repair") or {}).get(key)


REQUESTS = Metric(
    name="requests",
    kind=MetricKind.COUNTER,
    help="Client data requests answered by this node (the node the client sent them to), by outcome: "
    "ok, or the error code (bad_input, too_large and unknown_keyspace are the client's fault).",
    unit="requests",
    labels=("op", "consistency", "outcome"),
    part=OPS,
    view=(OPS,),
)
REQUEST_LATENCY = Metric(
    name="request_latency_seconds",
    kind=MetricKind.HISTOGRAM,
    help="Latency of successful client requests, from their arrival at this node to their answer.",
    unit="seconds",
    labels=("op", "consistency"),
    part=OPS,
    view=(OPS,),
)
NODE_REQUESTS = Metric(
    name="node_requests",
    kind=MetricKind.COUNTER,
    help="Requests this node served: client requests it coordinated, reads and writes as a "
    "replica (the load per node).",
    unit="requests",
    merge=Merge.PER_NODE,
    part=OPS,
    view=("requests",),
    read=lambda metrics, info: metrics.requests,
)
# The figures of a node's info() (core/node_views.py, node/process.py), read at the scrape.
HINTS_PENDING = Metric(
    name="hints_pending",
    kind=MetricKind.GAUGE,
    help="Hints waiting for delivery.",
    unit="hints",
    part=REPAIRS,
    view=("hints", "pending"),
    read=lambda metrics, info: info.get("hints", 0),
)
HINTS_OLDEST = Metric(
    name="hints_oldest_age_seconds",
    kind=MetricKind.GAUGE,
    help="Seconds the oldest hint this node holds has waited for delivery (0: none waits).",
    unit="seconds",
    merge=Merge.MAX,
    part=REPAIRS,
    view=("hints", "oldest_s"),
    read=lambda metrics, info: info.get("hints_oldest_s", 0.0),
)
# Anti-entropy's figures: the view keeps each node's three together (anti_entropy.repair_age).
REPAIR_AGE_VIEW = ("anti_entropy", "repair_age")
INFO_ROWS: tuple[Metric, ...] = (
    Metric(
        name="peer_rejections",
        kind=MetricKind.COUNTER,
        help="Peer connections and messages refused.",
        unit="connections and messages",
        labels=("reason",),
        merge=Merge.PER_NODE,
        read=lambda metrics, info: info.get("peer_rejections", {}),
    ),
    Metric(
        name="messages",
        kind=MetricKind.COUNTER,
        help="Peer messages.",
        unit="messages",
        labels=("event",),
        merge=Merge.PER_NODE,
        read=lambda metrics, info: {
            event: info.get("transport", {}).get(event, 0) for event in ("sent", "received", "dropped")
        },
    ),
    HINTS_PENDING,
    HINTS_OLDEST,
    Metric(
        name="repair_ranges",
        kind=MetricKind.GAUGE,
        help="Ranges this node replicates (compared by anti-entropy).",
        unit="ranges",
        merge=Merge.PER_NODE,
        part=REPAIRS,
        view=REPAIR_AGE_VIEW,
        read=lambda metrics, info: _repair("ranges")(metrics, info) or 0,
    ),
    Metric(
        name="repair_ranges_never_repaired",
        kind=MetricKind.GAUGE,
        help="Ranges anti-entropy has not compared yet since this node started.",
        unit="ranges",
        merge=Merge.PER_NODE,
        part=REPAIRS,
        view=REPAIR_AGE_VIEW,
        read=lambda metrics, info: _repair("never")(metrics, info) or 0,
    ),
    Metric(
        name="repair_oldest_age_seconds",
        kind=MetricKind.GAUGE,
        help="Seconds since the least recently repaired range was last compared by anti-entropy "
        "(absent until one range has been).",
        unit="seconds",
        merge=Merge.PER_NODE,
        part=REPAIRS,
        view=REPAIR_AGE_VIEW,
        read=_repair("oldest_s"),
    ),
    _storage_gauge("disk_bytes", "bytes", "Bytes of the node's store on disk (SSTables and WAL)."),
    _storage_gauge("wal_bytes", "bytes", "Bytes of the write-ahead log."),
    _storage_gauge("memtable_bytes", "bytes", "Bytes of the live memtable."),
    _storage_gauge("sstables", "SSTables", "SSTables on disk."),
    _storage_gauge(
        "compaction_backlog",
        "SSTables",
        "SSTables waiting in tiers due for compaction (the compaction backlog).",
    ),
    Metric(
        name="keys",
        kind=MetricKind.GAUGE,
        help="Keys stored on this node.",
        unit="keys",
        merge=Merge.PER_NODE,
        read=lambda metrics, info: info.get("keys", 0),
    ),
    Metric(
        name="members",
        kind=MetricKind.GAUGE,
        help="Members this node knows.",
        unit="members",
        merge=Merge.PER_NODE,
        read=lambda metrics, info: len(info.get("members", [])),
    ),
    Metric(
        name="peers_up",
        kind=MetricKind.GAUGE,
        help="Peers this node believes up.",
        unit="peers",
        merge=Merge.PER_NODE,
        read=lambda metrics, info: sum(info.get("peers", {}).values()),
    ),
)


def metrics_table(kind: type[NodeMetrics] = NodeMetrics) -> tuple[Metric, ...]:
    """The metrics table of a NodeMetrics class: the requests, its counters, the info() figures."""
    return (REQUESTS, REQUEST_LATENCY, NODE_REQUESTS, *counter_rows(kind), *INFO_ROWS)


METRICS: tuple[Metric, ...] = metrics_table()


def metrics_parts(table: tuple[Metric, ...] = METRICS) -> dict[str, tuple[str, ...]]:
    """What `metrics show=PART` keeps of the view: each part's top-level keys."""
    parts: dict[str, list[str]] = {part: [] for part in PARTS}
    for row in table:
        if row.part is not None and row.view and row.view[0] not in parts[row.part]:
            parts[row.part].append(row.view[0])
    return {part: tuple(keys) for part, keys in parts.items()}
