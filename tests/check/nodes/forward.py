"""echo with one leader hard-coded as "n0" (Maelstrom's first node): every other node passes a
client's request on to n0 unchanged, its `src` still the client (as Jepsen's raft.py does), and
n0 answers the client directly. MODE=impostor: the request is passed on as if it came from
another node (`src` that node's id), which the harness refuses."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", ".."))
from tests.check.nodes.maelnode import Body, Node

LEADER = "n0"
node = Node()
impostor = os.environ.get("MODE") == "impostor"


@node.on("echo")
def echo(body: Body, src: str) -> None:
    if node.id == LEADER:
        node.reply(body, src, {"type": "echo_ok", "echo": body["echo"]})
        return
    claimed = next(n for n in node.others() if n != LEADER) if impostor else src
    node.out.write(json.dumps({"src": claimed, "dest": LEADER, "body": body}).encode() + b"\n")
    node.out.flush()


node.run()
