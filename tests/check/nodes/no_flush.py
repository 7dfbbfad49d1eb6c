"""Writes init_ok without a newline and never flushes it (as a Python node that forgets
flush=True when its standard output is a pipe), then reads on."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", ".."))
from tests.check.nodes.maelnode import record_pid

record_pid()
out = open(1, "w", buffering=65536, closefd=False)  # noqa: SIM115 (the point: a buffer never flushed)
line = os.read(0, 65536).split(b"\n")[0]
init = json.loads(line)
answer = {"type": "init_ok", "in_reply_to": init["body"]["msg_id"]}
out.write(json.dumps({"src": init["dest"], "dest": init["src"], "body": answer}))
while os.read(0, 65536):
    pass
