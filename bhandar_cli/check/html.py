"""`check --report FILE`: a check as one self-contained HTML page (no script, nothing fetched).

At the top the verdict, its paragraph, the problems and the command that repeats the run; then
the run's timeline (a lane per fault kind, a lane per client with each operation a bar from
invocation to answer, the operations a problem names marked ▼), the Lamport diagram of every
message around the first problem's operations (check/diagram.py), the staleness curve when the
workload has one, and the text report. The checklist's page is its table, then each scenario's
curve. Colours are the chaos report's; shapes and words say what colour says.
"""

from __future__ import annotations

import math
from html import escape

from bhandar_cli.check.check_report import COLUMNS, render, repeat_command, status_of
from bhandar_cli.check.check_run import CheckOutcome
from bhandar_cli.check.diagram import lamport_svg
from bhandar_cli.check.staleness import Curve
from bhandar_cli.sim import FAULT_COLOURS, STYLE

WIDTH, LEFT, LANE = 1000, 90, 16
OUTCOMES = {"ok": ("#59a14f", "ok"), "fail": ("#f28e2b", "failed"), "info": ("#e15759", "indefinite")}
EXTRA = (
    ".verdict.unknown { color: #8a6d00; } table { border-collapse: collapse; } "
    "td, th { border: 1px solid #ccc; padding: 2px 6px; }"
)


def page(outcome: CheckOutcome) -> str:
    opts = outcome.options
    status = status_of(outcome)
    verdict = outcome.verdict
    css = {"valid": "passed", "invalid": "failed", "unknown": "verdict unknown", "error": "failed"}[status]
    head = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>bhandar check {escape(opts.workload)} seed {opts.seed}: {status}</title>",
        f"<style>{STYLE}{EXTRA}</style></head><body>",
        f"<h1>bhandar check: {escape(opts.workload)}, seed {opts.seed}</h1>",
        f'<p class="verdict {css}">{status.upper()}: {escape(_headline(outcome))}</p>',
        f'<div class="replay">repeat this run with: <code>{escape(repeat_command(opts))}</code></div>',
    ]
    named: set[int] = set()
    if verdict is not None and verdict.problems:
        head.append('<ol class="violations">')
        head += [f"<li>{escape(p.text)}</li>" for p in verdict.problems[:100]]
        head.append("</ol>")
        named = {i for p in verdict.problems for i in p.ops}
    if verdict is not None:
        head += [f'<p class="hint">Hint: {escape(hint)}</p>' for hint in verdict.hints]
    body = ["<h2>Timeline (seconds since the workload began)</h2>", timeline_svg(outcome, named)]
    first = next((p for p in verdict.problems if p.ops), None) if verdict is not None else None
    if first is not None:
        ops = [outcome.history.ops[i] for i in first.ops if i < len(outcome.history.ops)]
        diagram = lamport_svg(outcome.journal, ops, outcome.nodes)
        if diagram:
            body += [
                "<h2>Messages around the first problem</h2>",
                f"<p>Operations {', '.join('#' + str(op.index) for op in ops)}: "
                "their requests and answers in red; "
                "a cross is a message the network dropped. Hover an arrow for the whole message.</p>",
                diagram,
            ]
    if verdict is not None and verdict.staleness:
        body += ["<h2>Staleness</h2>", staleness_svg(verdict.staleness)]
    if outcome.net:
        body += ["<h2>Messages</h2>", net_table(outcome)]
    body += ["<h2>Report</h2>", f"<pre>{escape(render(outcome))}</pre>", "</body></html>"]
    return "\n".join(head + body) + "\n"


def net_table(outcome: CheckOutcome) -> str:
    """Maelstrom's net statistics: per group, sends, receives, messages and messages per op."""
    rows = ["<table><tr><th>messages</th><th>sent</th><th>received</th><th>distinct</th><th>per op</th></tr>"]
    for group in ("servers", "clients", "all"):
        tally = outcome.net[group]
        per_op = tally["msgs_per_op"]
        rows.append(
            f"<tr><td>{group}</td><td>{tally['send_count']:,}</td><td>{tally['recv_count']:,}</td>"
            f"<td>{tally['msg_count']:,}</td><td>{'-' if per_op is None else f'{per_op:g}'}</td></tr>"
        )
    return "".join(rows) + "</table>"


def _headline(outcome: CheckOutcome) -> str:
    verdict = outcome.verdict
    if verdict is None:
        return outcome.error
    if len(verdict.problems) > 1:
        return f"{len(verdict.problems)} problems; the first: {verdict.problems[0].text}"
    return verdict.summary


def timeline_svg(outcome: CheckOutcome, named: set[int]) -> str:
    ops = [op for op in outcome.history.ops]
    kinds = [k for k in FAULT_COLOURS if any(f.kind == k for f in outcome.faults)] + [
        k for k in ("pause", "slow") if any(f.kind == k for f in outcome.faults) and k not in FAULT_COLOURS
    ]
    clients = sorted({op.client for op in ops}, key=lambda c: int(c[1:]) if c[1:].isdigit() else 0)
    end = max([outcome.options.time_limit, *(op.completed for op in ops if math.isfinite(op.completed))])
    top, ops_top = 24, 24 + len(kinds) * LANE + 10
    height = ops_top + len(clients) * LANE + 20

    def x(t: float) -> float:
        return LEFT + WIDTH * min(max(t, 0.0), end) / end

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{LEFT + WIDTH + 10}" height="{height}">']
    for i in range(11):
        t = end * i / 10
        out.append(f'<line x1="{x(t):.1f}" y1="{top - 4}" x2="{x(t):.1f}" y2="{height - 10}" stroke="#ddd"/>')
        out.append(f'<text x="{x(t):.1f}" y="{top - 8}" text-anchor="middle">{t:.1f}s</text>')
    for lane, kind in enumerate(kinds):
        y = top + lane * LANE
        colour = FAULT_COLOURS.get(kind, "#bab0ac")
        out.append(f'<text x="4" y="{y + 12}">{kind}</text>')
        for f in outcome.faults:
            if f.kind == kind:
                tip = escape(f.text(outcome.nodes))
                out.append(
                    f'<rect class="fault" x="{x(f.start):.1f}" y="{y + 1}" '
                    f'width="{max(x(f.end) - x(f.start), 2):.1f}" height="{LANE - 2}" fill="{colour}" '
                    f'stroke="#333" stroke-width="0.5"><title>{tip}</title></rect>'
                )
    lane_of = {c: i for i, c in enumerate(clients)}
    for c, i in lane_of.items():
        out.append(f'<text x="4" y="{ops_top + i * LANE + 12}">{escape(c)}</text>')
    for op in ops:
        y = ops_top + lane_of[op.client] * LANE
        stop = op.completed if math.isfinite(op.completed) else end
        colour, said = OUTCOMES.get(op.type, ("#999", op.type))
        tip = escape(f"#{op.index} {op.f} at {op.node}: {said} {op.error}, {op.invoked:.3f}-{stop:.3f} s")
        shape = 'stroke="#000" stroke-width="1.5"' if op.type != "ok" or op.index in named else ""
        out.append(
            f'<rect class="op" x="{x(op.invoked):.1f}" y="{y + 2}" '
            f'width="{max(x(stop) - x(op.invoked), 1):.1f}" '
            f'height="{LANE - 4}" fill="{colour}" {shape}><title>{tip}</title></rect>'
        )
        if op.index in named:
            out.append(
                f'<text class="violation" x="{x(op.invoked):.1f}" y="{y + 2}" text-anchor="middle" '
                f'fill="#b00020" '
                f'font-size="15">▼<title>{tip}: named by a problem</title></text>'
            )
    out.append("</svg>")
    return "\n".join(out)


def staleness_svg(points: Curve, width: int = 420, height: int = 160) -> str:
    """Fraction of fresh reads per delay bucket, as a small line chart."""
    left, bottom = 40, height - 30
    step = (width - left - 10) / max(1, len(points) - 1)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="staleness" width="{width}" height="{height}">']
    out.append(f'<line x1="{left}" y1="10" x2="{left}" y2="{bottom}" stroke="#333"/>')
    out.append(f'<line x1="{left}" y1="{bottom}" x2="{width - 5}" y2="{bottom}" stroke="#333"/>')
    for frac in (0.0, 0.5, 1.0):
        y = bottom - frac * (bottom - 10)
        out.append(f'<text x="2" y="{y + 4:.1f}">{frac:.0%}</text>')
    coords = []
    for i, (top, frac, n) in enumerate(points):
        px, py = left + i * step, bottom - frac * (bottom - 10)
        coords.append(f"{px:.1f},{py:.1f}")
        label = f"&lt;{top:g}" if math.isfinite(top) else "more"
        out.append(f'<text x="{px:.1f}" y="{bottom + 14}" text-anchor="middle" font-size="10">{label}</text>')
        out.append(
            f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="#4e79a7"><title>{frac:.1%} fresh of {n} '
            f"(reads under {top:g} ms after the ack)</title></circle>"
        )
    out.append(f'<polyline points="{" ".join(coords)}" fill="none" stroke="#4e79a7" stroke-width="2"/>')
    out.append(
        f'<text x="{width / 2:.0f}" y="{height - 2}" text-anchor="middle">ms after the acknowledgement</text>'
    )
    out.append("</svg>")
    return "\n".join(out)


def checklist_page(title: str, rows: list[dict[str, object]], outcomes: list[CheckOutcome]) -> str:
    head = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(title)}</title><style>{STYLE}{EXTRA}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        "<table><tr>" + "".join(f"<th>{escape(c)}</th>" for c in COLUMNS) + "</tr>",
    ]
    for row in rows:
        head.append("<tr>" + "".join(f"<td>{escape(str(row[c]))}</td>" for c in COLUMNS) + "</tr>")
    head.append("</table>")
    body: list[str] = []
    for row, outcome in zip(rows, outcomes, strict=True):
        verdict = outcome.verdict
        body.append(f"<h2>{escape(str(row['scenario']))}: {escape(status_of(outcome))}</h2>")
        body.append(f"<p>{escape(verdict.summary if verdict else outcome.error)}</p>")
        body.append(f"<p><code>{escape(repeat_command(outcome.options))}</code></p>")
        if verdict is not None and verdict.staleness:
            body.append(staleness_svg(verdict.staleness))
    return "\n".join([*head, *body, "</body></html>"]) + "\n"
