"""A traced request as a message-sequence (Lamport) diagram: who sent what to whom, in order.

The coordinator's trace (core/protocol/pending.py `Trace`) is a list of `(ms, text)` steps written for people
("sent to A", "ack from A", "A answered: ..."); this module parses that text (a face parses and
renders only) into participants and ordered events the page draws. Rows are logical time: each
step is one row, so the diagram shows causality (send before receive) whatever the milliseconds;
the milliseconds label the rows. A replica's own events sit half a row after the request reached
it and half a row before its answer arrives, since its trace is not part of the coordinator's.
"""

from __future__ import annotations

import re
from typing import Any

CLIENT = "client"
DATA_COMMANDS = ("put", "get", "delete", "incr")

_COORDINATES = re.compile(r"^(\S+) coordinates (\w+) (\S+?)(?:, asks (.*)| .*)?$")
_FORWARDS = re.compile(r"^(\S+) forwards to (\S+)$")
_SENT = re.compile(r"^sent to (\S+)(?: \(hint for (\S+)\))?$")
_ACK = re.compile(r"^ack from (\S+)$")
_REFUSED = re.compile(r"^(\S+) refused: (.*)$")
_ANSWERED = re.compile(r"^(\S+) answered: (.*)$")
_REPAIR = re.compile(r"^read repair: sent the merged version to (\S+)$")
_SILENT = re.compile(r"^(\S+) did not answer within")


def request_view(
    cmd: str, reply: dict[str, Any], level: str, replicas: list[str] | None = None
) -> dict[str, Any]:
    """One data command's reply (its JSON shape) as a diagram: participants (the client, the
    coordinator, the key's replicas, then anyone else the trace names) and events."""
    steps = [(float(ms), str(text)) for ms, text in reply.get("trace", [])]
    events: list[dict[str, Any]] = []
    coordinator = reply.get("coordinator") or ""
    first: str | None = None  # the node the client's request reached
    pending: dict[str, int] = {}  # node -> index of the request event it has not answered yet
    for row, (ms, text) in enumerate(steps, start=1):
        event = _event(row, ms, text, coordinator)
        if event["kind"] == "start":
            coordinator = event["at"]
            if first is None:
                first = event["at"]
                events.append(
                    _msg(
                        0,
                        0.0,
                        CLIENT,
                        first,
                        f"{cmd} {reply.get('keyspace', '')}/{reply.get('key', '')} {level}",
                    )
                )
            for target in event["asks"]:  # a get names whom it asks in its first step
                if target != coordinator:
                    pending[target] = len(events)
                    events.append(_msg(row, ms, coordinator, target, "read"))
            event = {"kind": "note", "row": row, "ms": ms, "at": coordinator, "text": text}
        elif event["kind"] == "forward" and first is None:
            first = event["from"]
            events.append(
                _msg(
                    0, 0.0, CLIENT, first, f"{cmd} {reply.get('keyspace', '')}/{reply.get('key', '')} {level}"
                )
            )
            event = _msg(row, ms, event["from"], event["to"], "forward")
        if event["kind"] == "msg" and event["to"] != coordinator and event["from"] == coordinator:
            if event["to"] != CLIENT:
                pending[event["to"]] = len(events)
        elif event["kind"] == "msg" and event["to"] == coordinator and event["from"] in pending:
            request = events[pending.pop(event["from"])]
            request["answered"] = True
            event["reply_to"] = request["row"]
        events.append(event)
    for index in pending.values():
        events[index]["answered"] = False
    if not reply.get("ok", True) and not any(e.get("to") == CLIENT for e in events) and coordinator:
        events.append(
            _msg(
                len(steps) + 1,
                steps[-1][0] if steps else 0.0,
                coordinator,
                CLIENT,
                f"failed: {reply.get('code', '')}",
            )
        )
    participants = [CLIENT]
    for name in [coordinator, *(replicas or [])]:
        if name and name not in participants:
            participants.append(name)
    for e in events:
        for name in (e.get("from"), e.get("to"), e.get("at")):
            if name and name not in participants:
                participants.append(name)
    return {
        "cmd": cmd,
        "ok": bool(reply.get("ok", True)),
        "keyspace": reply.get("keyspace", ""),
        "key": reply.get("key", ""),
        "level": level,
        "coordinator": coordinator,
        "replicas": list(replicas or []),
        "summary": _summary(cmd, reply, level),
        "traced": bool(steps),
        "participants": participants,
        "events": events,
    }


def _event(row: int, ms: float, text: str, coordinator: str) -> dict[str, Any]:
    if m := _COORDINATES.match(text):
        asks = [n.strip() for n in m.group(4).split(",")] if m.group(4) else []
        return {"kind": "start", "at": m.group(1), "asks": asks}
    if m := _FORWARDS.match(text):
        return {"kind": "forward", "from": m.group(1), "to": m.group(2)}
    if m := _SENT.match(text):
        label = "write" + (f" (hint for {m.group(2)})" if m.group(2) else "")
        return _msg(row, ms, coordinator, m.group(1), label)
    if m := _ACK.match(text):
        if m.group(1) == coordinator:
            return {"kind": "note", "row": row, "ms": ms, "at": coordinator, "text": "own copy stored"}
        return _msg(row, ms, m.group(1), coordinator, "ack")
    if m := _REFUSED.match(text):
        return _msg(row, ms, m.group(1), coordinator, f"refused: {m.group(2)}")
    if m := _ANSWERED.match(text):
        return _msg(row, ms, m.group(1), coordinator, m.group(2))
    if m := _REPAIR.match(text):
        return _msg(row, ms, coordinator, m.group(1), "read repair")
    if text == "answered the client":
        return _msg(row, ms, coordinator, CLIENT, "answer")
    if text.startswith("failed: "):
        return _msg(row, ms, coordinator, CLIENT, text)
    if m := _SILENT.match(text):
        return {"kind": "note", "row": row, "ms": ms, "at": coordinator, "text": text, "silent": m.group(1)}
    return {"kind": "note", "row": row, "ms": ms, "at": coordinator, "text": text}


def _msg(row: int, ms: float, src: str, dst: str, label: str) -> dict[str, Any]:
    return {"kind": "msg", "row": row, "ms": ms, "from": src, "to": dst, "label": label}


def _summary(cmd: str, reply: dict[str, Any], level: str) -> str:
    what = f"{cmd} {reply.get('keyspace', '')}/{reply.get('key', '')} at {level}"
    if not reply.get("ok", True):
        return f"{what}: failed ({reply.get('error', reply.get('code', ''))})"
    if cmd == "get":
        return f"{what} via {reply.get('coordinator')}: {reply.get('replies', 0)} replies"
    acks, needed = reply.get("acks", 0), reply.get("needed", 0)
    return f"{what} via {reply.get('coordinator')}: {acks} acks of {needed} needed"
