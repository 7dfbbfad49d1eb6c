"""A correct echo node."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", ".."))
from tests.check.nodes.maelnode import Body, Node

node = Node()


@node.on("echo")
def echo(body: Body, src: str) -> None:
    node.reply(body, src, {"type": "echo_ok", "echo": body["echo"]})


node.run()
