"""An echo node that gets every third payload wrong."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", ".."))
from tests.check.nodes.maelnode import Body, Node

node = Node()
count = [0]


@node.on("echo")
def echo(body: Body, src: str) -> None:
    count[0] += 1
    payload = body["echo"] if count[0] % 3 else str(body["echo"]).upper()
    node.reply(body, src, {"type": "echo_ok", "echo": payload})


node.run()
