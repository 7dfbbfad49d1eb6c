"""The node `bhandar bench check` runs: tokens go round a ring of nodes, hop by hop.

A Maelstrom node (`python -m bhandar_cli.check.hop_node`) that answers `init` and passes every
`hop` message it receives to the next node of the ring (n1 -> n2 -> ... -> nN -> n1), stamped
with the time it sent it. It keeps the delay of every hop it received (the receive time minus
the sender's stamp: one monotonic clock on one machine) and, when its input ends or it gets
SIGTERM, writes `{"hops": N, "first_ns", "last_ns", "delays_us": [...]}` as one line on
standard error.

Without `init` (the direct-pipe baseline) it takes its id and the ring from $HOP_ID and $HOP_IDS,
and its standard output is the next node's standard input, so the dest field is never read; it
says it is ready (its SIGTERM handler set) by writing a byte to the descriptor $HOP_READY_FD.
It imports nothing of Bhandar: its cost is the same in both runs.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import time
from typing import Any

KEEP = 200_000  # delays kept (a sample: every hop past this is counted, not kept)


class Hop:
    def __init__(self) -> None:
        self.id = os.environ.get("HOP_ID", "")
        ring = os.environ.get("HOP_IDS", "")
        self.next = ""
        if self.id and ring:
            self.ring(ring.split(","))
        self.hops = 0
        self.delays: list[int] = []
        self.first = self.last = 0  # monotonic ns of the first and last hop received

    def ring(self, ids: list[str]) -> None:
        self.next = ids[(ids.index(self.id) + 1) % len(ids)]

    def handle(self, msg: dict[str, Any], out: list[bytes]) -> None:
        body = msg["body"]
        now = time.monotonic_ns()
        if body["type"] == "init":
            self.id = body["node_id"]
            self.ring(body["node_ids"])
            reply = {"type": "init_ok", "in_reply_to": body["msg_id"]}
            out.append(json.dumps({"src": self.id, "dest": msg["src"], "body": reply}).encode() + b"\n")
            return
        if body["type"] != "hop":
            return
        self.hops += 1
        self.first = self.first or now
        self.last = now
        if len(self.delays) < KEEP:
            self.delays.append((now - body["sent"]) // 1000)
        fwd = {"type": "hop", "token": body["token"], "sent": time.monotonic_ns()}
        out.append(json.dumps({"src": self.id, "dest": self.next, "body": fwd}).encode() + b"\n")

    def report(self) -> None:
        report = {"hops": self.hops, "first_ns": self.first, "last_ns": self.last, "delays_us": self.delays}
        sys.stderr.write(json.dumps(report) + "\n")
        sys.stderr.flush()


def main() -> None:
    hop = Hop()

    def stop(signum: int, frame: object) -> None:
        hop.report()
        os._exit(0)

    # A SIGTERM that lands after the interpreter last checked for signals but before the read
    # below blocks would leave the handler unrun until more input came, and at the end of a run
    # none comes (the other nodes are stopping too). So the signal also writes a byte to a pipe,
    # and the node waits on that pipe beside its input: a signal is never missed.
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGTERM, stop)
    ready = os.environ.get("HOP_READY_FD")
    if ready:  # the direct-pipe run waits for this before it starts the clock
        os.write(int(ready), b"r")
        os.close(int(ready))
    pending = b""
    broken = False  # the next node stopped first: the run is over, wait for the SIGTERM
    while True:
        readable, _, _ = select.select([0, wake_read], [], [])
        if wake_read in readable:  # the handler normally ran already, at select's return
            stop(signal.SIGTERM, None)
        chunk = os.read(0, 1 << 16)
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        out: list[bytes] = []
        for line in lines:
            if line.strip():
                hop.handle(json.loads(line), out)
        data = b"" if broken else b"".join(out)
        try:
            while data:
                data = data[os.write(1, data) :]
        except BrokenPipeError:
            broken = True
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})  # one report, written whole
    hop.report()


if __name__ == "__main__":
    main()
