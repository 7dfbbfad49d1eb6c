"""lin-kv through the lin-kv service (a proxy: linearizable because the service is).
MODE=cache: a node remembers what it last wrote or read for a key and answers reads from that
memory without asking the service: stale reads."""

import os
import sys
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", ".."))
from tests.check.nodes.maelnode import Body, Node

node = Node()
cache: dict[str, Any] = {}
caching = os.environ.get("MODE") == "cache"


def proxy(body: Body, src: str) -> None:
    key = str(body["key"])
    if caching and body["type"] == "read" and key in cache:
        node.reply(body, src, {"type": "read_ok", "value": cache[key]})
        return
    request = {k: v for k, v in body.items() if k != "msg_id"}

    def answer(reply: Body) -> None:
        if reply["type"] == "read_ok":
            cache[key] = reply["value"]
        elif reply["type"] == "write_ok":
            cache[key] = body["value"]
        elif reply["type"] == "cas_ok":
            cache[key] = body["to"]
        node.reply(body, src, {k: v for k, v in reply.items() if k not in ("msg_id", "in_reply_to")})

    node.rpc("lin-kv", request, answer)


for kind in ("read", "write", "cas"):
    node.on(kind)(proxy)
node.run()
