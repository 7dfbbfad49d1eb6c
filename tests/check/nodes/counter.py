"""g-counter and pn-counter: each node counts its own adds (P and N) on disk before the ack and
gossips its entries; a merge takes the entry-wise maximum. An add is identified by (client,
msg_id), so a retransmitted request counts once. MODE=twice: no such memory (a duplicated add
counts twice)."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", ".."))
from tests.check.nodes.maelnode import Body, Node, load, save

node = Node()
state = load({"p": {}, "n": {}, "done": []})
done = set(map(tuple, state["done"]))
twice = os.environ.get("MODE") == "twice"
node.dedupe = False  # this node remembers (client, msg_id) itself, on disk


@node.on("add")
def add(body: Body, src: str) -> None:
    ident = (src, body["msg_id"])
    if twice or ident not in done:
        done.add(ident)
        side = "p" if body["delta"] >= 0 else "n"
        state[side][node.id] = state[side].get(node.id, 0) + abs(body["delta"])
        state["done"] = sorted(done)
        save(state)
    node.reply(body, src, {"type": "add_ok"})


@node.on("read")
def read(body: Body, src: str) -> None:
    value = sum(state["p"].values()) - sum(state["n"].values())
    node.reply(body, src, {"type": "read_ok", "value": value})


@node.on("merge")
def merge(body: Body, src: str) -> None:
    changed = False
    for side in ("p", "n"):
        for who, count in body[side].items():
            if count > state[side].get(who, 0):
                state[side][who] = count
                changed = True
    if changed:
        save(state)


def gossip() -> None:
    for peer in node.others():
        node.send(peer, {"type": "merge", "p": state["p"], "n": state["n"]})


node.every(0.05, gossip)
node.run()
