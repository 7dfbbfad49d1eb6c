"""What a chaos run reports: the report record, its deterministic summary, its JSON, the replay line.

Every line of the summary depends only on the seed and the options (a test compares two runs byte
for byte); real-time figures are on their own line (`render_timing`) and in `REAL_TIME_FIELDS`.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from bhandar_cli.sim import CheckResult
from bhandar_cli.sim.chaos.chaos_options import ChaosOptions, ChaosParams
from bhandar_cli.sim.chaos.storage_faults import StorageStats

REAL_TIME_FIELDS = (
    "real_seconds",
    "events_per_second",
    "ops_per_second",
    "bare_loop_events_per_second",
    "events_ratio",
    "cpu_seconds",
    "cpu_us_per_op",
    "cpu_us_per_event",
)


@dataclass(frozen=True, slots=True)
class MovementSummary:
    """Range movements of a run: nodes that joined, left, and decommissions that did not happen."""

    joined: tuple[str, ...] = ()
    left: tuple[str, ...] = ()
    aborted: tuple[str, ...] = ()  # decommissions refused, or lost to a crash before they began
    unfinished: tuple[str, ...] = ()  # still moving when the heal gave up (also a violation)
    ring: tuple[str, ...] = ()  # the nodes of the ring the checker judged the replicas by


@dataclass(frozen=True, slots=True)
class ChaosReport:
    options: ChaosOptions
    params: ChaosParams
    check: CheckResult
    faults: dict[str, int]
    hints_stored: int
    hints_delivered: int
    hints_expired: int
    read_repairs: int
    messages: int
    dropped: int
    events: int
    sim_seconds: float
    workload_seconds: float  # simulated seconds until the last client operation finished
    real_seconds: float
    repair_rounds: int = 0  # rounds of `repair` on every live node it took the replicas to agree
    address_moves: int = 0  # restarts at a new address (membership by seed addresses)
    repair_keys: int = 0  # keys those rounds exchanged
    disagreeing_keys: int = 0  # keys whose replicas differed when the repair rounds began
    movements: MovementSummary = field(default_factory=MovementSummary)
    storage: StorageStats | None = None  # with `--storage lsm`
    hot: dict[str, Any] | None = None  # with `--hot`: the `hot` view when the workload ended
    # A bare heapq loop's events per real second in the same process (bench/loop_baseline.py); 0: not
    # measured (a swarm's seeds skip it).
    bare_loop_events_per_second: float = 0.0
    # The run's timeline for `chaos --report`: each fault as (kind, what, start, end) in simulated
    # seconds, and, when asked for, each client operation as (invoked, completed, client, kind,
    # keyspace/key, outcome, code) (completed is inf for one never answered).
    spans: tuple[tuple[str, str, float, float], ...] = ()
    history: tuple[tuple[float, float, int, str, str, str, str], ...] = ()
    # CPU seconds of the run (this process's, from options to verdict): unlike real time, it
    # hardly moves when other programs compete for the machine's cores.
    cpu_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.check.passed

    @property
    def events_per_second(self) -> float:
        return self.events / self.real_seconds if self.real_seconds > 0 else 0.0

    @property
    def ops_per_second(self) -> float:
        return self.check.ops / self.real_seconds if self.real_seconds > 0 else 0.0

    @property
    def cpu_us_per_op(self) -> float:
        return 1e6 * self.cpu_seconds / self.check.ops if self.check.ops else 0.0

    @property
    def cpu_us_per_event(self) -> float:
        return 1e6 * self.cpu_seconds / self.events if self.events else 0.0

    @property
    def events_ratio(self) -> float:
        """The run's events/s as a share of the bare loop's (0 when the loop was not measured)."""
        bare = self.bare_loop_events_per_second
        return self.events_per_second / bare if bare > 0 else 0.0


def reproduce_command(options: ChaosOptions) -> str:
    """The command line that replays this run (every option that was fixed)."""
    parts = ["bhandar", "chaos", "--seed", str(options.seed), "--ops", str(options.ops)]
    if options.nodes is not None:
        parts += ["--nodes", str(options.nodes)]
    if options.replicas is not None:
        parts += ["--replicas", str(options.replicas)]
    if options.faults is not None:
        parts += ["--faults", ",".join(options.faults) or "none"]
    if options.consistency is not None:
        parts += ["--consistency", options.consistency]
    if options.keys is not None:
        parts += ["--keys", str(options.keys)]
    if options.clients is not None:
        parts += ["--clients", str(options.clients)]
    if options.storage is not None:
        parts += ["--storage", options.storage]
    if options.hot:
        parts += ["--hot", f"{options.hot:g}"]
    for bug in options.bugs:
        parts += ["--bug", bug]
    return shlex.join(parts)


def _pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.2f}%" if whole else "-"


def _names(names: tuple[str, ...]) -> str:
    return ",".join(names) or "none"


def render_summary(report: ChaosReport) -> str:
    """The deterministic summary: the same seed and options print the same text, byte for byte."""
    p, c = report.params, report.check
    faults = ", ".join(f"{k} {v}" for k, v in report.faults.items()) or "none"
    kinds = " ".join(f"{k} {v}" for k, v in c.by_kind.items())
    mv = report.movements
    lines = [
        f"chaos seed {p.seed}: {c.ops} operations by {p.clients} clients on {p.keys} keys per keyspace",
        f"  cluster        {p.nodes} nodes in {p.zones} zones, {p.vnodes} vnodes, N={p.replicas}, "
        f"levels {','.join(p.levels)}, storage {p.storage}"
        + (
            f", membership by seed addresses ({report.address_moves} restarts at a new address)"
            if p.addressing
            else ""
        ),
        f"  timeouts       request {p.request_timeout:.3f} s, gossip every {p.gossip_interval:.3f} s, "
        f"phi pause {p.phi_pause:.3f} s, hints every {p.hint_interval:.3f} s, "
        f"hints expire after {p.hint_max_age:.3g} s",
        f"  faults         {','.join(p.faults.kinds) or 'none'}: every {p.faults.interval:.2f} s, "
        f"lasting {p.faults.duration:.2f} s, at most {p.faults.max_down} down, "
        f"delay up to {p.faults.max_delay * 1000:.0f} ms, loss up to {p.faults.max_loss:.0%}",
        f"  injected       {faults}",
        f"  movements      joined {_names(mv.joined)}; left {_names(mv.left)}; "
        f"aborted {_names(mv.aborted)}; unfinished {_names(mv.unfinished)}; "
        f"ring at the end {_names(mv.ring)}",
        f"operations       {c.ops} ({kinds})",
        f"  succeeded      {c.ok_ops}  availability {_pct(c.ok_ops, c.ops)}",
        f"  acked writes   {c.acked_writes}",
        f"  lost writes    {c.lost_writes}",
        f"  stale reads    {c.stale_reads} of {c.reads} reads ({c.strict_stale_reads} under strict quorum; "
        f"{c.moving_stale_reads} more of writes made during range movements, not judged)",
        f"  siblings seen  {c.reads_with_siblings} reads with siblings, at most {c.max_siblings}; "
        f"{c.stored_twice} puts stored twice (a client request taken twice across a restart; goal 0)",
        f"  counters       {c.counter_keys} keys, {c.increments} increments, {c.retries} retried attempts",
        f"hints            stored {report.hints_stored}, delivered {report.hints_delivered}, "
        f"expired {report.hints_expired}",
        f"read repairs     {report.read_repairs}",
    ]
    s = report.storage
    if s is not None:
        lines.append(
            f"storage          {s.crashes} disk crashes ({s.mid_io} inside a disk operation, {s.torn_tails} "
            f"torn tails, {s.truncated_bytes} bytes "
            f"truncated at recovery, {s.unsynced_bytes_lost} unsynced bytes at the crashes), "
            f"{s.flushes} flushes, {s.compactions} compactions, {s.fsyncs} fsyncs"
        )
    if report.hot is not None:
        lines += _hot_lines(report.hot)
    lines += [
        f"network          {report.messages} messages, {report.dropped} dropped",
        f"anti-entropy     {report.disagreeing_keys} keys differed after the heal; {report.repair_rounds} "
        f"rounds of repair on their live replicas exchanged {report.repair_keys} keys",
        f"checked          {c.keys_checked} keys",
        f"simulated        {report.sim_seconds:.3f} s ({report.workload_seconds:.3f} s of workload), "
        f"{report.events} events",
    ]
    if c.passed:
        lines.append("result           OK: no violations")
    else:
        lines.append(f"result           FAILED: {len(c.violations)} violations")
    return "\n".join(lines) + "\n"


def _hot_lines(hot: dict[str, Any]) -> list[str]:
    """The hot keys when the workload ended, and the share of all requests each node replicates."""
    lines = [
        f"hot keys         {e['keyspace']}/{e['key']}: {100 * e['share']:.1f}% of requests, "
        f"replicas {' '.join(e['replicas'])}"
        for e in hot["keys"]
    ]
    load = " ".join(f"{node} {100 * share:.0f}%" for node, share in hot["replica_load"].items())
    return [*lines, f"  replica load   {load}"]


def render_timing(report: ChaosReport) -> str:
    """Real-time figures, on their own line because they differ from run to run."""
    bare = ""
    if (loop := report.bare_loop_events_per_second) > 0:
        bare = f" (bare loop {loop:,.0f} events/s, ratio {report.events_ratio:.3f})"
    cpu = ""
    if report.cpu_seconds > 0:
        cpu = (
            f"; CPU {report.cpu_seconds:.2f} s, {report.cpu_us_per_op:,.0f} us per operation, "
            f"{report.cpu_us_per_event:.1f} us per event"
        )
    return (
        f"real time        {report.real_seconds:.2f} s, {report.events_per_second:,.0f} events/s{bare}, "
        f"{report.ops_per_second:,.0f} ops/s{cpu}\n"
    )


def report_json(report: ChaosReport) -> dict[str, Any]:
    p, c = report.params, report.check
    mv = report.movements
    s = report.storage
    return {
        "cmd": "chaos",
        "seed": p.seed,
        "ops": c.ops,
        "ok_ops": c.ok_ops,
        "acked_writes": c.acked_writes,
        "lost_writes": c.lost_writes,
        "availability": round(c.availability, 6),
        "stale_reads": c.stale_reads,
        "strict_stale_reads": c.strict_stale_reads,
        "moving_stale_reads": c.moving_stale_reads,
        "reads": c.reads,
        "reads_with_siblings": c.reads_with_siblings,
        "max_siblings": c.max_siblings,
        "stored_twice": c.stored_twice,
        "increments": c.increments,
        "retries": c.retries,
        "hints_stored": report.hints_stored,
        "hints_delivered": report.hints_delivered,
        "hints_expired": report.hints_expired,
        "read_repairs": report.read_repairs,
        "repair_rounds": report.repair_rounds,
        "address_moves": report.address_moves,
        "repair_keys": report.repair_keys,
        "disagreeing_keys": report.disagreeing_keys,
        "messages": report.messages,
        "dropped": report.dropped,
        "faults": report.faults,
        "movements": {
            "joined": list(mv.joined),
            "left": list(mv.left),
            "aborted": list(mv.aborted),
            "unfinished": list(mv.unfinished),
            "ring": list(mv.ring),
        },
        "storage": None
        if s is None
        else {
            "crashes": s.crashes,
            "mid_io_crashes": s.mid_io,
            "torn_tails": s.torn_tails,
            "truncated_bytes": s.truncated_bytes,
            "unsynced_bytes_lost": s.unsynced_bytes_lost,
            "flushes": s.flushes,
            "compactions": s.compactions,
            "fsyncs": s.fsyncs,
        },
        "params": {
            "nodes": p.nodes,
            "zones": p.zones,
            "vnodes": p.vnodes,
            "replicas": p.replicas,
            "levels": list(p.levels),
            "clients": p.clients,
            "keys": p.keys,
            "request_timeout": round(p.request_timeout, 6),
            "hint_max_age": round(p.hint_max_age, 6),
            "storage": p.storage,
            "membership": "seeds" if p.addressing else "static",
            "fault_kinds": list(p.faults.kinds),
        },
        "events": report.events,
        "sim_seconds": round(report.sim_seconds, 6),
        "real_seconds": round(report.real_seconds, 3),
        "events_per_second": round(report.events_per_second),
        "ops_per_second": round(report.ops_per_second),
        "bare_loop_events_per_second": round(report.bare_loop_events_per_second),
        "events_ratio": round(report.events_ratio, 4),
        "cpu_seconds": round(report.cpu_seconds, 3),
        "cpu_us_per_op": round(report.cpu_us_per_op, 1),
        "cpu_us_per_event": round(report.cpu_us_per_event, 2),
        "ok": report.ok,
        **({"hot": report.hot} if report.hot is not None else {}),
        "violations": [str(v) for v in c.violations[:100]],
        "reproduce": None if report.ok else reproduce_command(report.options),
    }
