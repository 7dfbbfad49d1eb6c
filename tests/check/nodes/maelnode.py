"""A small Maelstrom node library for the fixture nodes of tests/check (not part of Bhandar).

One thread: `run` reads standard input with select, dispatches each message to the handler of
its type, answers RPC callbacks by `in_reply_to`, and runs periodic tasks between messages.
`save`/`load` keep a node's state in $BHANDAR_CHECK_DIR (written and fsynced before it answers),
so a node that is killed and restarted comes back with what it acknowledged.
"""

from __future__ import annotations

import json
import os
import select
import sys
import time
from collections.abc import Callable
from typing import Any

Body = dict[str, Any]


class Node:
    def __init__(self) -> None:
        self.id = ""
        self.ids: list[str] = []
        self.handlers: dict[str, Callable[[Body, str], None]] = {}
        self.callbacks: dict[int, Callable[[Body], None]] = {}
        self.tasks: list[list[Any]] = []  # [period, next due, fn]
        self.next_id = 0
        self.on_init: Callable[[], None] = lambda: None
        self.out = sys.stdout.buffer
        self.dedupe = True  # a client's retransmitted request (same src and msg_id) is handled once
        self.seen: set[tuple[str, int]] = set()

    def on(self, kind: str) -> Callable[[Callable[[Body, str], None]], Callable[[Body, str], None]]:
        def register(fn: Callable[[Body, str], None]) -> Callable[[Body, str], None]:
            self.handlers[kind] = fn
            return fn

        return register

    def every(self, seconds: float, fn: Callable[[], None]) -> None:
        self.tasks.append([seconds, time.monotonic() + seconds, fn])

    def send(self, dest: str, body: Body) -> None:
        line = json.dumps({"src": self.id, "dest": dest, "body": body}) + "\n"
        self.out.write(line.encode())
        self.out.flush()

    def reply(self, req: Body, src: str, body: Body) -> None:
        self.send(src, {**body, "in_reply_to": req["msg_id"]})

    def rpc(self, dest: str, body: Body, callback: Callable[[Body], None]) -> None:
        self.next_id += 1
        self.callbacks[self.next_id] = callback
        self.send(dest, {**body, "msg_id": self.next_id})

    def others(self) -> list[str]:
        return [n for n in self.ids if n != self.id]

    def handle(self, msg: dict[str, Any]) -> None:
        body, src = msg["body"], msg["src"]
        if body["type"] == "init":
            self.id, self.ids = body["node_id"], body["node_ids"]
            self.on_init()
            self.reply(body, src, {"type": "init_ok"})
            return
        if "in_reply_to" in body:
            callback = self.callbacks.pop(body["in_reply_to"], None)
            if callback is not None:
                callback(body)
            return
        if self.dedupe and src.startswith("c") and "msg_id" in body:
            if (src, body["msg_id"]) in self.seen:
                return
            self.seen.add((src, body["msg_id"]))
        handler = self.handlers.get(body["type"])
        if handler is None:
            if "msg_id" in body:
                self.reply(body, src, {"type": "error", "code": 10, "text": f"no {body['type']}"})
            return
        handler(body, src)

    def run(self) -> None:
        pending = b""
        while True:
            now = time.monotonic()
            wait = min((t[1] for t in self.tasks), default=now + 1.0) - now
            ready, _, _ = select.select([0], [], [], max(0.0, wait))
            if ready:
                chunk = os.read(0, 65536)
                if not chunk:
                    return
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if line.strip():
                        self.handle(json.loads(line))
            now = time.monotonic()
            for task in self.tasks:
                if now >= task[1]:
                    task[1] = now + task[0]
                    task[2]()


def state_path() -> str | None:
    where = os.environ.get("BHANDAR_CHECK_DIR")
    return os.path.join(where, "state.json") if where else None


def load(default: Any) -> Any:
    path = state_path()
    if path is None or not os.path.exists(path):
        return default
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def save(state: Any) -> None:
    path = state_path()
    if path is None:
        return
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def record_pid(pid: int | None = None) -> None:
    """Note a process this node runs, for a test to check that none outlives the check."""
    where = os.environ.get("BHANDAR_CHECK_DIR")
    if where:
        with open(os.path.join(os.path.dirname(where), "pids"), "a", encoding="utf-8") as f:
            f.write(f"{pid or os.getpid()}\n")
