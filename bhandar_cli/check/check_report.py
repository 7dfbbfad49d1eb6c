"""What a check reports: the text a person reads, the JSON a script reads, the command that
repeats the run, and the checklist's table.

The text: what ran (program, workload, seed), the faults, the operations and their latency,
the staleness curve when the workload has one, then the verdict: VALID, INVALID or UNKNOWN with
its paragraph, and for an invalid run the first problems, each naming its operations. A run
that could not be judged says why on standard error (the command prints it).
"""

from __future__ import annotations

import math
import shlex
from typing import Any

from bhandar_cli.check.check_run import CheckOptions, CheckOutcome, default_timeout
from bhandar_cli.check.maelstrom_history import availability_text
from bhandar_cli.check.staleness import Curve
from bhandar_cli.check.staleness import render as render_staleness

PROBLEMS_SHOWN = 10


def repeat_command(opts: CheckOptions) -> str:
    """The command line that runs the same plan again: every option that differs from its
    default. Faults a library caller gave outright (`CheckOptions.plan`) have no option: the line
    then says that it repeats the run without them."""
    defaults = CheckOptions(argv=opts.argv, workload=opts.workload, log_dir=opts.log_dir)
    parts = ["bhandar", "check", "--bin", shlex.join(opts.argv), "-w", opts.workload]
    parts += ["--node-count", str(opts.node_count), "--concurrency", str(opts.concurrency)]
    parts += ["--rate", f"{opts.rate:g}", "--time-limit", f"{opts.time_limit:g}s", "--seed", str(opts.seed)]
    if opts.latency_ms:
        parts += ["--latency", f"{opts.latency_ms:g}ms"]
    if opts.latency_ms and opts.latency_dist != defaults.latency_dist:
        parts += ["--latency-dist", opts.latency_dist]
    if opts.duplicate_clients:
        parts += ["--duplicate-clients"]
    if opts.scenario:
        parts += ["--scenario", opts.scenario]
    elif opts.nemesis and not opts.plan:
        parts += ["--nemesis", ",".join(opts.nemesis), "--nemesis-interval", f"{opts.interval:g}s"]
    for option, value, default in (
        ("--timeout", opts.op_timeout, default_timeout(opts.workload, opts.latency_ms)),
        ("--recovery", opts.recovery, defaults.recovery),
        ("--init-timeout", opts.init_timeout, defaults.init_timeout),
    ):
        if value != default:
            parts += [option, f"{value:g}s"]
    if opts.flood_limit != defaults.flood_limit:
        parts += ["--flood-limit", str(opts.flood_limit)]
    if opts.availability is not None:
        parts += ["--availability", availability_text(opts.availability)]
    if opts.consistency_models:
        parts += ["--consistency-models", ",".join(opts.consistency_models)]
    line = " ".join(shlex.quote(p) for p in parts)
    if opts.plan:
        line += "  # without its faults: they were given by the caller (CheckOptions.plan), not drawn"
    return line


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, math.ceil(q * len(sorted_values)) - 1)]


def latency_ms(outcome: CheckOutcome) -> dict[str, float]:
    done = sorted(
        (op.completed - op.invoked) * 1000.0 for op in outcome.history.ops if op.ok and not op.final
    )
    return {"p50": round(percentile(done, 0.5), 2), "p99": round(percentile(done, 0.99), 2)}


def op_counts(outcome: CheckOutcome) -> dict[str, int]:
    counts = {"ok": 0, "fail": 0, "info": 0}
    for op in outcome.history.ops:
        if not op.final and op.type in counts:
            counts[op.type] += 1
    return {"ops": sum(counts.values()), **counts}


def plain_curve(points: Curve) -> list[dict[str, Any]]:
    """A staleness curve for strict JSON: the last bucket has no upper bound, so its `upto_ms` is
    null and `open_ended` true (JSON has no Infinity)."""
    return [
        {
            "upto_ms": t if math.isfinite(t) else None,
            "open_ended": not math.isfinite(t),
            "fresh": round(f, 4),
            "samples": n,
        }
        for t, f, n in points
    ]


def status_of(outcome: CheckOutcome) -> str:
    return "error" if outcome.error else outcome.verdict.status if outcome.verdict else "error"


def render(outcome: CheckOutcome) -> str:
    """The whole text report of one run."""
    opts = outcome.options
    lines = [
        f"bhandar check: {opts.node_count} x {shlex.join(opts.argv)}, workload {opts.workload}, "
        f"{opts.concurrency} clients at {opts.rate:g} ops/s for {opts.time_limit:g} s, seed {opts.seed}",
        f"repeat with: {repeat_command(opts)}",
    ]
    if outcome.faults:
        lines.append("faults: " + "; ".join(f.text(outcome.nodes) for f in outcome.faults))
    else:
        lines.append("faults: none")
    counts, lat = op_counts(outcome), latency_ms(outcome)
    lines.append(
        f"operations: {counts['ops']} ({counts['ok']} ok, {counts['fail']} failed, "
        f"{counts['info']} indefinite), "
        f"latency p50 {lat['p50']:g} ms, p99 {lat['p99']:g} ms"
    )
    msgs = outcome.messages
    lines.append(
        f"messages: {msgs.get('node', 0):,} between nodes "
        f"({outcome.network.get('dropped', 0):,} dropped by the network), "
        f"{msgs.get('client', 0):,} to clients, {msgs.get('service', 0):,} to services; "
        f"{outcome.restarts} restarts; {outcome.real_seconds:.1f} s in all"
    )
    lines.append(net_line(outcome))
    lines += answer_lines(outcome)
    verdict = outcome.verdict
    if verdict is not None and verdict.staleness:
        lines.append(render_staleness(verdict.staleness, float(verdict.stats.get("latest_miss_ms", 0.0))))
    if verdict is not None:
        lines.append(f"{verdict.status.upper()}: {verdict.summary}")
        if len(verdict.problems) > 3:
            lines.append("problems:")
            lines += [f"  {i}. {p.text}" for i, p in enumerate(verdict.problems[:PROBLEMS_SHOWN], 1)]
            if len(verdict.problems) > PROBLEMS_SHOWN:
                lines.append(
                    f"  ... and {len(verdict.problems) - PROBLEMS_SHOWN} more (see -o json or --report)"
                )
    lines.append(f"logs: {opts.log_dir} (one log per node, history.jsonl)")
    return "\n".join(lines)


def net_line(outcome: CheckOutcome) -> str:
    """Maelstrom's net statistics on one line: messages, and messages per operation, between
    servers (Gossip Glomers' targets are on these), with clients, and all."""
    parts = []
    for group in ("servers", "clients", "all"):
        tally = outcome.net.get(group, {})
        per_op = tally.get("msgs_per_op")
        per = f" ({per_op:g} per op)" if per_op is not None else ""
        parts.append(f"{group} {tally.get('msg_count', 0):,} msgs{per}")
    every = outcome.net.get("all", {})
    return (
        f"net: {', '.join(parts)}; {every.get('send_count', 0):,} sent, "
        f"{every.get('recv_count', 0):,} received"
    )


def answer_lines(outcome: CheckOutcome) -> list[str]:
    """The answers the clients got, all nodes together, then each node's that were not plainly
    matched (late, repeated, unmatched, errors by code and text)."""
    accounts = outcome.answers
    total = {
        what: sum(getattr(a, what) for a in accounts.values())
        for what in ("matched", "late", "repeated", "unmatched")
    }
    errors = sum(sum(a.errors.values()) for a in accounts.values())
    lines = [
        f"answers: {total['matched']:,} matched ({errors:,} of them errors), {total['late']:,} late "
        f"(after the request's --timeout), {total['repeated']:,} repeated, {total['unmatched']:,} unmatched"
    ]
    for node, account in accounts.items():
        parts = []
        if account.errors:
            parts.append("errors " + "; ".join(account.error_lines()[:5]))
        if account.late:
            parts.append(f"{account.late:,} late")
        if account.repeated:
            parts.append(f"{account.repeated:,} repeated")
        if account.unmatched:
            without = account.without_reply_to
            parts.append(f"{account.unmatched:,} unmatched ({without:,} without in_reply_to)")
        if parts:
            lines.append(f"  {node}: {account.matched:,} matched; " + "; ".join(parts))
    return lines


def to_json(outcome: CheckOutcome, report: str = "") -> dict[str, Any]:
    opts = outcome.options
    verdict = outcome.verdict
    out: dict[str, Any] = {
        "cmd": "check",
        "ok": outcome.exit_code == 0,
        "verdict": status_of(outcome),
        "exit": outcome.exit_code,
        "workload": opts.workload,
        "program": list(opts.argv),
        "seed": opts.seed,
        "nodes": outcome.nodes,
        "clients": opts.concurrency,
        "rate": opts.rate,
        "time_limit_s": opts.time_limit,
        "faults": [f.plain() for f in outcome.faults],
        "operations": op_counts(outcome),
        "latency_ms": latency_ms(outcome),
        "messages": {**outcome.messages, **outcome.network},
        "net": outcome.net,
        "answers": {node: account.plain() for node, account in outcome.answers.items()},
        "restarts": outcome.restarts,
        "events": outcome.events,
        "real_seconds": round(outcome.real_seconds, 3),
        "logs": opts.log_dir,
        "repeat": repeat_command(opts),
    }
    if opts.availability is not None:
        out["availability"] = availability_text(opts.availability)
    if outcome.error:
        out["error"] = outcome.error
    if verdict is not None:
        out["summary"] = verdict.summary
        out["problems"] = [{"kind": p.kind, "text": p.text, "ops": list(p.ops)} for p in verdict.problems]
        out["stats"] = verdict.stats
        out["hints"] = list(verdict.hints)
        out["staleness"] = plain_curve(verdict.staleness)
    if report:
        out["report"] = report
    return out


# --- the checklist ----------------------------------------------------------------------------------

COLUMNS = ("scenario", "ops", "ok", "failed", "indefinite", "lost", "stale reads", "p99 ms", "verdict")


def checklist_row(name: str, outcome: CheckOutcome) -> dict[str, Any]:
    counts, stats = op_counts(outcome), outcome.verdict.stats if outcome.verdict else {}
    staleness = outcome.verdict.staleness if outcome.verdict else ()
    return {
        "scenario": name,
        "ops": counts["ops"],
        "ok": counts["ok"],
        "failed": counts["fail"],
        "indefinite": counts["info"],
        "lost": stats.get("lost", "-"),
        "stale reads": stats.get("stale_reads", "-"),
        "p99 ms": latency_ms(outcome)["p99"],
        "verdict": status_of(outcome),
        "staleness": plain_curve(staleness),
        "latest_miss_ms": stats.get("latest_miss_ms", "-"),
        "missed_reads": sum(n - round(fresh * n) for _, fresh, n in staleness),
    }


def curve_line(row: dict[str, Any]) -> str:
    """A scenario's staleness curve on one line: `no fault: <1 ms 93%, <5 ms 100%; ...`."""
    points = ", ".join(
        f"<{p['upto_ms']:g} ms {p['fresh']:.0%}" if p["upto_ms"] is not None else f"later {p['fresh']:.0%}"
        for p in row["staleness"]
    )
    # Every read fresh: there is no latest miss to time, and "0.0 ms" would read as one.
    if row["missed_reads"] == 0:
        return f"{row['scenario']}: {points}; no read missed a write"
    return f"{row['scenario']}: {points}; the latest miss {row['latest_miss_ms']} ms after the ack"


def render_table(rows: list[dict[str, Any]]) -> str:
    cells = [list(COLUMNS)] + [
        [f"{row[c]:g}" if isinstance(row[c], float) else str(row[c]) for c in COLUMNS] for row in rows
    ]
    widths = [max(len(r[i]) for r in cells) for i in range(len(COLUMNS))]
    out = []
    for n, r in enumerate(cells):
        out.append(
            " | ".join(
                v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(r, widths, strict=True))
            )
        )
        if n == 0:
            out.append("-+-".join("-" * w for w in widths))
    return "\n".join(out)
