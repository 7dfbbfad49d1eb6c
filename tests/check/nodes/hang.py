"""Answers init, starts a child that sleeps, ignores SIGTERM, and never answers a request."""

import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", ".."))
from tests.check.nodes.maelnode import Body, Node, record_pid

signal.signal(signal.SIGTERM, signal.SIG_IGN)
record_pid()
child = subprocess.Popen(["sleep", "600"])
record_pid(child.pid)
node = Node()


@node.on("echo")
def echo(body: Body, src: str) -> None:
    pass  # never answered


node.run()
