"""An echo node whose answers go astray, as $MODE says:

- wrong-reply: 9 answers in 10 carry an in_reply_to one past the request's msg_id;
- no-reply-to: every answer lacks in_reply_to;
- late: every answer is sent 0.8 s after its request (past the tests' 0.5 s timeout);
- errors: every request is answered with error 11 "not leader".
"""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", ".."))
from tests.check.nodes.maelnode import Body, Node

MODE = os.environ["MODE"]
node = Node()
count = [0]
held: list[tuple[float, str, Body]] = []  # (when due, client, answer) of the late mode


@node.on("echo")
def echo(body: Body, src: str) -> None:
    count[0] += 1
    answer = {"type": "echo_ok", "echo": body["echo"], "in_reply_to": body["msg_id"]}
    if MODE == "wrong-reply" and count[0] % 10:
        answer["in_reply_to"] = body["msg_id"] + 1
    elif MODE == "no-reply-to":
        del answer["in_reply_to"]
    elif MODE == "errors":
        answer = {"type": "error", "code": 11, "text": "not leader", "in_reply_to": body["msg_id"]}
    elif MODE == "late":
        held.append((time.monotonic() + 0.8, src, answer))
        return
    node.send(src, answer)


def send_due() -> None:
    now = time.monotonic()
    while held and held[0][0] <= now:
        _, src, answer = held.pop(0)
        node.send(src, answer)


node.every(0.05, send_due)
node.run()
