"""Answers init, then exits with status 3 at its first request."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", ".."))
from tests.check.nodes.maelnode import Body, Node, record_pid

record_pid()
node = Node()


@node.on("echo")
def echo(body: Body, src: str) -> None:
    sys.stderr.write("giving up on purpose\n")
    sys.exit(3)


node.run()
