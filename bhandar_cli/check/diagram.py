"""The Lamport diagram of a check around some operations: every message of the journal in their
time window, drawn as inline SVG (no script).

One vertical lifeline per participant (the operations' clients, then the nodes); time runs down,
one row per event (a send or an arrival), so causality reads top to bottom whatever the
milliseconds, which label the rows. An arrow goes from its send to its arrival; a message the
network dropped ends in a cross halfway; the requests and answers of the operations shown are
drawn bold in red, and each is labelled with its type (and for a client's message its key and
value). At most `MAX_MESSAGES` messages are drawn, the operations' own first.
"""

from __future__ import annotations

import base64
import json
from html import escape

import cbor2

from bhandar_cli.check.maelstrom_history import MaelstromOperation
from bhandar_cli.check.router import Envelope

MAX_MESSAGES = 120
COLUMN = 130  # px between lifelines
ROW = 18  # px per event
TOP = 40
LEFT = 70
LABEL_FIELDS = ("key", "value", "from", "to", "delta", "message", "element", "echo", "values", "code")


def _label(env: Envelope) -> str:
    body = env.body
    kind = str(body.get("type", "?"))
    if kind == "bhandar":  # a Bhandar node's own frame: name the core message it carries
        kind = _frame_type(body.get("frame"))
    parts = [kind]
    for field in LABEL_FIELDS:
        if field in body:
            text = json.dumps(body[field], separators=(",", ":"))
            parts.append(f"{field}={text if len(text) <= 24 else text[:21] + '...'}")
    return " ".join(parts)


def _frame_type(frame: object) -> str:
    try:
        decoded = cbor2.loads(base64.b64decode(str(frame)))
        return str(decoded.get("$t", "bhandar")) if isinstance(decoded, dict) else "bhandar"
    except Exception:  # not a frame we can read: keep the body's own type
        return "bhandar"


def window_messages(
    journal: list[Envelope], ops: list[MaelstromOperation], lanes: set[str]
) -> tuple[list[Envelope], set[int]]:
    """The messages between `lanes` sent while the operations ran (a little before and after):
    the operations' own, then the others nearest in time to those, at most MAX_MESSAGES, in time
    order; and the ids (`id()`) of the operations' own messages."""
    start = min(op.invoked for op in ops)
    end = max(op.completed if op.completed != float("inf") else op.invoked for op in ops)
    margin = max(0.005, (end - start) * 0.1)
    own_ids = {(op.client, op.msg_id) for op in ops}
    own: list[Envelope] = []
    others: list[Envelope] = []
    for env in journal:
        if (
            env.sent < start - margin
            or env.sent > end + margin
            or env.sender not in lanes
            or env.dest not in lanes
        ):
            continue
        mine = (env.src, env.body.get("msg_id")) in own_ids or (
            env.dest,
            env.body.get("in_reply_to"),
        ) in own_ids
        (own if mine else others).append(env)
    times = sorted(e.sent for e in own) or [start]
    others.sort(key=lambda e: min(abs(e.sent - t) for t in times))
    chosen = own + others[: max(0, MAX_MESSAGES - len(own))]
    chosen.sort(key=lambda e: e.sent)
    return chosen, {id(e) for e in own}


def lamport_svg(journal: list[Envelope], ops: list[MaelstromOperation], nodes: list[str]) -> str:
    """The diagram as one <svg> element ('' when no message falls in the window)."""
    services = sorted({e.dest for e in journal if e.dest not in nodes and not e.dest.startswith("c")})
    lanes = sorted({op.client for op in ops}) + list(nodes) + services
    messages, own = window_messages(journal, ops, set(lanes))
    if not messages:
        return ""
    x = {name: LEFT + i * COLUMN for i, name in enumerate(lanes)}
    events: list[tuple[float, int, int]] = []  # (time, 0 send | 1 arrival, message index)
    for i, env in enumerate(messages):
        events.append((env.sent, 0, i))
        if env.arrived is not None:
            events.append((env.arrived, 1, i))
    events.sort()
    row_of: dict[tuple[int, int], int] = {}
    for row, (_, kind, i) in enumerate(events):
        row_of[(i, kind)] = row
    height = TOP + (len(events) + 1) * ROW
    width = LEFT + len(lanes) * COLUMN
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="lamport" width="{width}" height="{height}">',
        '<defs><marker id="arrow" markerWidth="8" markerHeight="8" refX="7" refY="4" orient="auto">'
        '<path d="M0,0 L8,4 L0,8 z" fill="#333"/></marker>'
        '<marker id="arrow-own" markerWidth="8" markerHeight="8" refX="7" refY="4" orient="auto">'
        '<path d="M0,0 L8,4 L0,8 z" fill="#b00020"/></marker></defs>',
    ]
    for name, lx in x.items():
        out.append(
            f'<text x="{lx}" y="{TOP - 18}" text-anchor="middle" font-weight="bold">{escape(name)}</text>'
        )
        out.append(f'<line x1="{lx}" y1="{TOP - 10}" x2="{lx}" y2="{height - 5}" stroke="#999"/>')
    for row, (t, _, _) in enumerate(events):
        if row % 3 == 0:
            out.append(f'<text x="4" y="{TOP + row * ROW + 4}" fill="#666">{t * 1000:.1f} ms</text>')
    for i, env in enumerate(messages):
        if env.sender not in x or env.dest not in x:
            continue
        x1, y1 = x[env.sender], TOP + row_of[(i, 0)] * ROW  # a forwarded request leaves its node
        mine = id(env) in own
        colour = "#b00020" if mine else "#333"
        weight = "2.2" if mine else "1"
        label = escape(_label(env))
        tip = escape(f"{env.src} -> {env.dest} {json.dumps(env.body)[:300]}")
        if env.arrived is None:
            x2 = (x1 + x[env.dest]) / 2
            y2 = y1 + ROW
            out.append(
                f'<g class="dropped"><title>{tip} (dropped)</title>'
                f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" '
                f'stroke="{colour}" stroke-width="{weight}" stroke-dasharray="4 3"/>'
                f'<text x="{x2}" y="{y2 + 4}" text-anchor="middle" fill="{colour}" '
                f'font-size="14">✖</text></g>'
            )
            continue
        x2, y2 = x[env.dest], TOP + row_of[(i, 1)] * ROW
        marker = "arrow-own" if mine else "arrow"
        out.append(
            f'<g class="{"own" if mine else "msg"}"><title>{tip}</title>'
            f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" '
            f'stroke="{colour}" stroke-width="{weight}" marker-end="url(#{marker})"/>'
            f'<text x="{(x1 + x2) / 2}" y="{(y1 + y2) / 2 - 3}" text-anchor="middle" fill="{colour}" '
            f'font-size="10">{label}</text></g>'
        )
    out.append("</svg>")
    return "\n".join(out)
