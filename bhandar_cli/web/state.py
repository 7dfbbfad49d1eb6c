"""The web view's state snapshot: one JSON object with everything the page draws.

Built only from the client's views (status, members, ring, hints, metrics, prefs, clock), as the
REPL builds its tables, plus what the session's own commands answered (the last requests, for the
sequence diagrams; the focused key). `WebState` observes the session (`Session.observers`), so a
command typed in the terminal and one sent from the page show alike.
"""

from __future__ import annotations

import io
from collections import deque
from typing import TYPE_CHECKING, Any

from bhandar_cli.client import MARKS, MEANINGS, HintsView, MembersView, RingOwnershipView, StatusView
from bhandar_cli.core.model import BhandarError
from bhandar_cli.web.sequence import DATA_COMMANDS, request_view

if TYPE_CHECKING:
    from bhandar_cli.repl import Command, Reply, Session

RECENT = 6  # requests kept for the sequence diagrams
LOGGED = 12  # commands kept for the page's session log
LOG_CHARS = 2000  # of one command's printed reply
# A table in the page's log is laid out as wide as the page measured its log box, in characters
# (`log_view`, asked by each page for its own width), within these bounds; the snapshot's own `log`,
# for readers of /api/state, at LOG_COLUMNS.
LOG_COLUMNS = 80
MIN_LOG_COLUMNS = 32
MAX_LOG_COLUMNS = 240
PRINTED_WIDTHS = 4  # widths a log entry keeps printed (a page or two, each at its text size)
MAX_STEPS = 60  # a trace longer than this is cut (a diagram of hundreds of arrows helps nobody)


class WebState:
    """What the page shows that the cluster does not know: the session's recent requests and the
    key in focus. Changes bump `version` so the server knows a new snapshot is worth sending."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.recent: deque[dict[str, Any]] = deque(maxlen=RECENT)
        self.focus: tuple[str, str] | None = None
        self.contexts: dict[tuple[str, str], str] = {}  # the last get's context string per key
        self.log: deque[_LogEntry] = deque(maxlen=LOGGED)  # the session's commands, newest first
        self.version = 0
        self.demo: dict[str, Any] | None = None  # the classroom demo being played, if any

    def set_demo(self, view: dict[str, Any]) -> None:
        """A Narration listener (teach/narration.py): the demo's step, narration and checks."""
        self.demo = view
        self.version += 1

    def observe(self, cmd: Command, reply: Reply) -> None:
        """A session observer: remember data commands (and what the cluster commands changed)."""
        self.version += 1
        self.log.appendleft(_LogEntry(cmd.text or cmd.name, reply))
        if cmd.name not in DATA_COMMANDS:
            return
        data = reply.to_json()
        if reply.ok or "trace" in data:
            level = cmd.options.get("c") or self.session.client.data.consistency
            ks, key = cmd.arg(0), cmd.arg(1)
            data.setdefault("keyspace", ks)
            data.setdefault("key", key)
            if len(data.get("trace", [])) > MAX_STEPS:
                data["trace"] = data["trace"][:MAX_STEPS]
            self.recent.appendleft({"cmd": cmd.name, "reply": data, "level": str(level)})
            self.focus = (ks, key)
            if cmd.name == "get" and data.get("context"):
                self.contexts[(ks, key)] = data["context"]

    def log_view(self, columns: int = LOG_COLUMNS) -> dict[str, Any]:
        """The session's log, newest first, its replies printed `columns` characters wide (within
        the bounds): a page asks for the width it measured its log box at."""
        columns = max(MIN_LOG_COLUMNS, min(MAX_LOG_COLUMNS, columns))
        entries = [
            {"line": e.line, "ok": e.reply.ok, "text": e.printed(columns, self.session)} for e in self.log
        ]
        return {"columns": columns, "log": entries}

    def set_focus(self, keyspace: str, key: str) -> None:
        self.focus = (keyspace, key)
        self.version += 1

    async def snapshot(self, metrics: dict[str, Any] | None = None) -> dict[str, Any]:
        """The whole picture now; `metrics` is the last metrics view (costlier, fetched less often)."""
        client = self.session.client
        status = await client.views.status()
        members = await _or_none(client.admin.members())
        hints = await _or_none(client.views.hints())
        ring = await client.views.ring()
        return {
            "nodes": node_cards(status, members, hints),
            "health": status["summary"],  # the header's line and counts: what the REPL's bar says
            "partitions": status["partitions"],
            "ring": ring_view(ring),
            "consistency": client.data.consistency,
            "trace": client.data.trace,
            "requests": [await self._request(r) for r in self.recent],
            "focus": await self._focus(),
            "latency": latency_view(metrics) if metrics else {},
            "members_from": members["from"] if members else None,
            "log": self.log_view()["log"],
            "demo": self.demo,
        }

    async def _request(self, entry: dict[str, Any]) -> dict[str, Any]:
        reply = entry["reply"]
        prefs = await _or_none(self.session.client.views.prefs(reply["keyspace"], reply["key"]))
        replicas = prefs["replicas"] if prefs else []
        return request_view(entry["cmd"], reply, entry["level"], replicas)

    async def _focus(self) -> dict[str, Any] | None:
        if self.focus is None:
            return None
        ks, key = self.focus
        client = self.session.client
        prefs = await _or_none(client.views.prefs(ks, key))
        clock = await _or_none(client.views.clock(ks, key))
        return {
            "keyspace": ks,
            "key": key,
            "token": prefs["token"] if prefs else None,
            "replicas": prefs["replicas"] if prefs else [],
            "fallbacks": prefs["fallbacks"] if prefs else [],
            "holders": clock["replicas"] if clock else {},
            "down": clock["down"] if clock else [],
            "relations": clock["relations"] if clock else [],
            "context": self.contexts.get((ks, key), ""),
        }


class _LogEntry:
    """One command of the page's log and its reply, printed at each width a page asked for (the
    box changes width with the window and the text size; the reply stays what it was)."""

    def __init__(self, line: str, reply: Reply) -> None:
        self.line = line
        self.reply = reply
        self._printed: dict[int, str] = {}  # by width: the few the open pages asked for

    def printed(self, width: int, session: Session) -> str:
        """The reply as the REPL prints it (its table view, without colour), `width` columns wide."""
        if width not in self._printed:
            from rich.console import Console

            from bhandar_cli.repl import one_table_each, render

            out = io.StringIO()
            # Text unwrapped (soft_wrap): the page wraps it once, at its box's width (wrapped here
            # too, a sentence broke at two widths). Tables are laid out to the box's width, each
            # as one table: the box's height is what the newest reply lacks first.
            with one_table_each():
                Console(file=out, width=width, color_system=None, soft_wrap=True).print(
                    render(self.reply, session.commands)
                )
            text = out.getvalue().rstrip()
            if len(self._printed) >= PRINTED_WIDTHS:
                self._printed.clear()
            self._printed[width] = text if len(text) <= LOG_CHARS else text[:LOG_CHARS] + " ..."
        return self._printed[width]


async def _or_none(call: Any) -> Any:
    """A view that may fail while the cluster is broken (every node down): None, never a crash."""
    try:
        return await call
    except BhandarError:
        return None


def node_cards(
    status: StatusView, members: MembersView | None, hints: HintsView | None
) -> list[dict[str, Any]]:
    """One card per node: its state in the vocabulary of cluster_health (the same words as the
    REPL's), phi as one live node's failure detector sees it, zone, partition group, hints held,
    keys, and which running peers believe it down."""
    phi = {m["id"]: m.get("phi", 0.0) for m in ([] if members is None else members["members"])}
    held: dict[str, dict[str, int]] = {}
    for queue in [] if hints is None else hints["queues"]:
        held.setdefault(queue["holder"], {})[queue["target"]] = queue["count"]
    cards = []
    for node in status["nodes"]:
        name = node["id"]
        cards.append(
            {
                "id": name,
                "state": node["state"],
                "mark": MARKS[node["state"]],
                "meaning": MEANINGS[node["state"]],
                "code": node["code"],
                "status": node["status"],
                "phi": round(float(phi.get(name, 0.0)), 1),  # finer changes every heartbeat
                "suspected_by": node["seen_down_by"],
                "zone": node["zone"],
                "group": node["group"],
                "keys": node["keys"],
                "hints": node["hints"],
                "hints_for": held.get(name, {}),
                "tokens": node["tokens"],
                "owns": node["owns"],
            }
        )
    return cards


def ring_view(ring: RingOwnershipView) -> dict[str, Any]:
    """The ring as arcs: each token range (lo, hi] with its owner and the owner's zone."""
    zones = ring["zones"]
    arcs = [
        {"lo": r["range"][0], "hi": r["range"][1], "owner": r["owner"], "zone": zones.get(r["owner"], "")}
        for r in ring["ranges"]
    ]
    return {"arcs": arcs, "ownership": ring["ownership"], "zones": zones, "space": 2**32}


def latency_view(metrics: dict[str, Any]) -> dict[str, Any]:
    """Per operation and level: the count and the latency histogram (non-cumulative bars)."""
    out: dict[str, Any] = {}
    for op, levels in metrics.get("ops", {}).items():
        for level, stats in levels.items():
            hist = stats.get("histogram", {"le_ms": [], "counts": []})
            counts = hist["counts"]
            bars = [c - (counts[i - 1] if i else 0) for i, c in enumerate(counts)]
            over = stats["ok"] - (counts[-1] if counts else 0)
            out[f"{op} {level}"] = {
                "count": stats["count"],
                "ok": stats["ok"],
                "p50_ms": stats["p50_ms"],
                "p99_ms": stats["p99_ms"],
                "le_ms": hist["le_ms"],
                "bars": [*bars, max(over, 0)],
            }
    return out
