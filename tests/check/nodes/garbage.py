"""Answers init, then writes a line that is not a message."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", ".."))
from tests.check.nodes.maelnode import Body, Node, record_pid

record_pid()
node = Node()


@node.on("echo")
def echo(body: Body, src: str) -> None:
    sys.stdout.write("hello, this is not JSON\n")
    sys.stdout.flush()


node.run()
