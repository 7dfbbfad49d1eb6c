"""dynamo-kv with one leader (n0, the first node) that keeps every key's siblings on disk: other
nodes forward to it and relay its answer. A sibling is (id, value); a context names the ids a get
returned, and a put replaces exactly those. MODE=early: a node that is not the leader
acknowledges a put at once and forwards it once, unretried (lost when the forward is);
MODE=ignore: the leader ignores contexts, so every put becomes a sibling."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", ".."))
from tests.check.nodes.maelnode import Body, Node, load, save

node = Node()
state = load({"keys": {}, "next": 0})
mode = os.environ.get("MODE", "")


def apply(body: Body) -> Body:
    key = str(body["key"])
    siblings = state["keys"].get(key, [])
    if body["type"] == "get":
        context = json.dumps(sorted(s[0] for s in siblings))
        return {"type": "get_ok", "values": [s[1] for s in siblings], "context": context}
    seen = set(json.loads(body["context"])) if body.get("context") and mode != "ignore" else set()
    state["next"] += 1
    state["keys"][key] = [s for s in siblings if s[0] not in seen] + [[state["next"], body["value"]]]
    save(state)
    return {"type": "put_ok"}


def serve(body: Body, src: str) -> None:
    if node.id == node.ids[0]:
        node.reply(body, src, apply(body))
        return
    request = {k: v for k, v in body.items() if k != "msg_id"}
    if mode == "early" and body["type"] == "put":
        node.send(node.ids[0], {**request, "type": "forward"})
        node.reply(body, src, {"type": "put_ok"})
        return

    def relay(reply: Body) -> None:
        node.reply(body, src, {k: v for k, v in reply.items() if k not in ("msg_id", "in_reply_to")})

    node.rpc(node.ids[0], request, relay)


@node.on("forward")
def forward(body: Body, src: str) -> None:
    apply({**body, "type": "put"})


node.on("get")(serve)
node.on("put")(serve)
node.run()
