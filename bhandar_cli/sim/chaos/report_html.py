"""`chaos --report FILE`: a chaos run as one self-contained HTML page (no script, nothing fetched).

At the top, whether the checker passed and, if not, the violations and the command that replays
the run; then a timeline in simulated seconds drawn as inline SVG: one lane per kind of fault with
each fault a band (its extent also shaded behind the operations), one lane per client with each
operation a bar from invocation to answer, and the operations on keys with violations marked; then
the run's summary as the terminal shows it. Shapes and words say what colour says.
"""

from __future__ import annotations

import math
import re
from html import escape
from typing import TYPE_CHECKING

from bhandar_cli.sim import FAULT_COLOURS, STYLE
from bhandar_cli.sim.chaos.report import render_summary, reproduce_command

if TYPE_CHECKING:
    from bhandar_cli.sim.chaos.report import ChaosReport

WIDTH = 1200  # px of the timeline's time axis
LEFT = 110  # px of lane labels
LANE = 16
SHOWN = 100  # violations listed
_OP_NUMBER = re.compile(r"#(\d+)")  # how a violation names an operation ("read #981")
OUTCOME = {"ok": ("#59a14f", "ok"), "fail": ("#f28e2b", "failed"), "timeout": ("#e15759", "timed out")}


def render_html(report: ChaosReport) -> str:
    """The whole page."""
    seed = report.options.seed
    ok = report.ok
    violations = report.check.violations
    bad_keys = {f"{v.keyspace}/{v.key}" for v in violations}
    named = {int(n) for v in violations for n in _OP_NUMBER.findall(v.detail)}
    head = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>bhandar chaos seed {seed}: {'passed' if ok else 'FAILED'}</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>Chaos run, seed {seed}</h1>",
    ]
    if ok:
        verdict = "✔ PASSED: nothing acknowledged was lost, replicas converged"
        head.append(f'<p class="verdict passed">{verdict}</p>')
    else:
        head += [
            f'<p class="verdict failed">✖ FAILED: {len(violations)} violation(s)</p>',
            '<div class="replay">replay this run with: '
            f"<code>{escape(reproduce_command(report.options))}</code></div>",
            '<ol class="violations">',
            *(f"<li>{escape(str(v))}</li>" for v in violations[:SHOWN]),
            "</ol>",
        ]
        if len(violations) > SHOWN:
            head.append(f"<p>... and {len(violations) - SHOWN} more</p>")
    body = [
        "<h2>Timeline (simulated seconds)</h2>",
        _legend(report),
        timeline_svg(report, bad_keys, named),
        "<h2>Summary</h2>",
        f"<pre>{escape(render_summary(report))}</pre>",
        "</body></html>",
    ]
    return "\n".join(head + body) + "\n"


def timeline_svg(report: ChaosReport, bad_keys: set[str], named: set[int]) -> str:
    """Faults and operations against simulated time; operations on keys with a violation are
    outlined, and those a violation names (`read #981`) carry a ▼."""
    kinds = [k for k in FAULT_COLOURS if any(s[0] == k for s in report.spans)]
    clients = sorted({op[2] for op in report.history})
    end = max(
        [report.sim_seconds, *(s[3] for s in report.spans if math.isfinite(s[3]))]
        + [op[1] for op in report.history if math.isfinite(op[1])]
    )
    end = end if end > 0 else 1.0
    top, faults_h = 24, len(kinds) * LANE
    ops_top = top + faults_h + 10
    height = ops_top + len(clients) * LANE + 30

    def x(t: float) -> float:
        return LEFT + WIDTH * min(max(t, 0.0), end) / end

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{LEFT + WIDTH + 10}" height="{height}">']
    for i in range(11):  # the time axis
        t = end * i / 10
        out.append(f'<line x1="{x(t):.1f}" y1="{top - 4}" x2="{x(t):.1f}" y2="{height - 20}" stroke="#ddd"/>')
        out.append(f'<text x="{x(t):.1f}" y="{top - 8}" text-anchor="middle">{t:.1f}s</text>')
    for lane, kind in enumerate(kinds):
        y = top + lane * LANE
        out.append(f'<text x="4" y="{y + 12}">{escape(kind)}</text>')
        for k, what, start, stop in report.spans:
            if k != kind:
                continue
            stop = stop if math.isfinite(stop) else end
            w = max(x(stop) - x(start), 2.0)
            colour = FAULT_COLOURS[kind]
            tip = escape(f"{kind} {what}: {start:.2f}s to {stop:.2f}s")
            out.append(  # the band in its lane, and its extent shaded behind the operations
                f'<rect class="fault" data-kind="{kind}" x="{x(start):.1f}" y="{y + 1}" width="{w:.1f}" '
                f'height="{LANE - 2}" fill="{colour}" stroke="#333" stroke-width="0.5">'
                f"<title>{tip}</title></rect>"
                f'<rect x="{x(start):.1f}" y="{ops_top}" width="{w:.1f}" height="{len(clients) * LANE}" '
                f'fill="{colour}" opacity="0.12"/>'
            )
    workload_end = x(report.workload_seconds)
    out.append(
        f'<line x1="{workload_end:.1f}" y1="{top}" x2="{workload_end:.1f}" y2="{height - 20}" '
        f'stroke="#000" stroke-dasharray="6 3"/><text x="{workload_end + 3:.1f}" y="{height - 6}">'
        "workload over: faults stop, heal and repair begin</text>"
    )
    lane_of = {c: i for i, c in enumerate(clients)}
    for i, client in enumerate(clients):
        out.append(f'<text x="4" y="{ops_top + i * LANE + 12}">client {client}</text>')
    for index, (invoked, completed, client, kind, key, outcome, code) in enumerate(report.history):
        y = ops_top + lane_of[client] * LANE
        stop = completed if math.isfinite(completed) else end
        colour, said = OUTCOME.get(outcome, ("#999", outcome))
        bad = key in bad_keys
        why = f" ({code})" if code else ""
        tip = escape(f"{kind} {key}: {said}{why}, {invoked:.3f}s to {stop:.3f}s")
        shape = 'stroke="#000" stroke-width="1.5"' if bad or outcome != "ok" else ""
        h = LANE - 4 if outcome == "ok" else LANE - 2  # failures stand out by their height too
        out.append(
            f'<rect class="op" data-outcome="{outcome}" x="{x(invoked):.1f}" y="{y + (LANE - h) / 2:.1f}" '
            f'width="{max(x(stop) - x(invoked), 1.0):.1f}" height="{h}" fill="{colour}" {shape}>'
            f"<title>{tip}</title></rect>"
        )
        if index in named:
            out.append(
                f'<text class="violation" x="{x(invoked):.1f}" y="{y + 2}" text-anchor="middle" '
                f'fill="#b00020" font-size="15">▼<title>#{index} {tip}: named by a violation</title></text>'
            )
    out.append("</svg>")
    return "\n".join(out)


def _legend(report: ChaosReport) -> str:
    faults = "".join(
        f'<span><span class="box" style="background:{c}"></span>{k} ({report.faults.get(k, 0)})</span>'
        for k, c in FAULT_COLOURS.items()
        if report.faults.get(k)
    )
    ops = "".join(
        f'<span><span class="box" style="background:{c}"></span>{said} operation</span>'
        for c, said in OUTCOME.values()
    )
    return (
        f'<p class="legend">Faults (band per fault, hover for details): {faults or "none"}</p>'
        f'<p class="legend">Operations (bar from invocation to answer; a failed or timed-out one is '
        f"taller and outlined, as is one on a key with a violation): {ops}<span>▼ an operation a violation "
        "names</span></p>"
    )
