"""`bhandar node maelstrom` says nothing before `init`, on its first start and after a restart.

A Maelstrom node learns its own id from `init`; before that, anything it wrote would claim to come
from "". `bhandar check --seed 206` (dynamo-kv, partition/kill/slow) caught a restarted node doing
just that: a client's request overtook the new life's `init` and was answered with error 11 from
''. Such a message is held and served once `init` is answered, so the request is neither answered
wrongly nor lost.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

DEADLINE = 30.0  # seconds for the answers a test waits for (a cold start on a loaded machine)


class MaelstromProcess:
    """One life of `bhandar node maelstrom` on standard input and output; stopped on exit."""

    def __init__(self, data_dir: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-P", "-m", "bhandar_cli", "node", "maelstrom", "--data-dir", str(data_dir)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.lines: list[dict[str, Any]] = []
        self._pending = b""

    def send(self, src: str, body: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"src": src, "dest": "n1", "body": body}).encode() + b"\n")
        self.proc.stdin.flush()

    def answers(self, *msg_ids: int) -> dict[int, dict[str, Any]]:
        """The messages answering `msg_ids` (by `in_reply_to`), waiting for them under a deadline."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + DEADLINE
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while not set(msg_ids) <= {m["body"].get("in_reply_to") for m in self.lines}:
                left = deadline - time.monotonic()
                assert left > 0, f"no answer to {msg_ids} within {DEADLINE:g} s: {self.lines}"
                if selector.select(left):
                    chunk = os.read(fd, 1 << 16)
                    assert chunk, f"the node exited before answering {msg_ids}: {self.lines}"
                    *done, self._pending = (self._pending + chunk).split(b"\n")
                    self.lines += [json.loads(line) for line in done if line.strip()]
        return {m["body"]["in_reply_to"]: m for m in self.lines if m["body"].get("in_reply_to") in msg_ids}

    def __enter__(self) -> MaelstromProcess:
        return self

    def __exit__(self, *_: object) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()  # end of input stops the node and closes its store
        try:
            self.proc.wait(timeout=DEADLINE)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


INIT = {"type": "init", "node_id": "n1", "node_ids": ["n1"]}


def test_a_request_before_init_is_served_after_it(tmp_path: Path) -> None:
    with MaelstromProcess(tmp_path) as node:
        node.send("c1", {"type": "put", "key": "k", "value": 7, "context": None, "msg_id": 1})
        node.send("c0", {**INIT, "msg_id": 2})
        got = node.answers(1, 2)
        assert got[2]["body"]["type"] == "init_ok"
        assert got[1]["body"]["type"] == "put_ok", got[1]
        assert node.lines.index(got[2]) < node.lines.index(got[1])  # init_ok first
        assert all(m["src"] == "n1" for m in node.lines), node.lines


def test_after_a_restart_what_overtook_init_is_served_after_it(tmp_path: Path) -> None:
    with MaelstromProcess(tmp_path) as node:
        node.send("c0", {**INIT, "msg_id": 1})
        node.send("c1", {"type": "put", "key": "k", "value": 7, "context": None, "msg_id": 2})
        assert node.answers(2)[2]["body"]["type"] == "put_ok"
    # A new life on the same data: a peer's frame and a client's read arrive before its `init`.
    with MaelstromProcess(tmp_path) as node:
        node.send("n2", {"type": "bhandar", "frame": "not a frame"})  # dropped after init, logged
        node.send("c2", {"type": "get", "key": "k", "msg_id": 1})
        node.send("c0", {**INIT, "msg_id": 2})
        got = node.answers(1, 2)
        assert got[2]["body"]["type"] == "init_ok"
        assert got[1]["body"]["type"] == "get_ok" and got[1]["body"]["values"] == [7], got[1]
        assert got[1]["dest"] == "c2"
        assert all(m["src"] == "n1" for m in node.lines), node.lines
