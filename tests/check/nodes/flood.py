"""Answers init, then, on the first request, writes messages to its neighbour without end."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", ".."))
from tests.check.nodes.maelnode import Body, Node, record_pid

record_pid()
node = Node()


@node.on("echo")
def echo(body: Body, src: str) -> None:
    line = (json.dumps({"src": node.id, "dest": node.others()[0], "body": {"type": "spam"}}) + "\n").encode()
    while True:
        sys.stdout.buffer.write(line * 100)


node.run()
