"""echo that starts two children which leave its session (setsid) and sleep for ten minutes: one
with the node's environment, one with an empty one (so only its place in the process tree says
whose it is). Every pid is noted for the test (maelnode.record_pid)."""

import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", ".."))
from tests.check.nodes.maelnode import Body, Node, record_pid

SLEEPER = "import os, time; os.setsid(); time.sleep(600)"
record_pid()
environments: list[dict[str, str] | None] = [None, {}]
for env in environments:
    child = subprocess.Popen([sys.executable, "-c", SLEEPER], env=env)
    record_pid(child.pid)
node = Node()


@node.on("echo")
def echo(body: Body, src: str) -> None:
    node.reply(body, src, {"type": "echo_ok", "echo": body["echo"]})


node.run()
