"""Answers init with an init_ok whose in_reply_to is not the init's msg_id, then reads on."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", ".."))
from tests.check.nodes.maelnode import record_pid

record_pid()
init = json.loads(os.read(0, 65536).split(b"\n")[0])
answer = {"type": "init_ok", "in_reply_to": init["body"]["msg_id"] + 1000}
sys.stdout.write(json.dumps({"src": init["dest"], "dest": init["src"], "body": answer}) + "\n")
sys.stdout.flush()
while os.read(0, 65536):
    pass
