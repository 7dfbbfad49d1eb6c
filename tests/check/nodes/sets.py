"""broadcast and g-set in one node: elements kept on disk before the ack, and gossiped to every
other node (the whole set, every 50 ms) until they are everywhere; a node killed and restarted
gets back what others have. MODE=drop: a broadcast is sent once to the neighbours and never again
(lost to a partition); MODE=local: g-set adds are never gossiped at all."""

import os
import sys
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", ".."))
from tests.check.nodes.maelnode import Body, Node, load, save

node = Node()
seen = set(load([]))
mode = os.environ.get("MODE", "")
neighbours: list[str] = []


def add(element: Any) -> None:
    if element not in seen:
        seen.add(element)
        save(sorted(seen))


@node.on("topology")
def topology(body: Body, src: str) -> None:
    neighbours[:] = body["topology"].get(node.id, [])
    node.reply(body, src, {"type": "topology_ok"})


@node.on("broadcast")
def broadcast(body: Body, src: str) -> None:
    add(body["message"])
    if mode == "drop":
        for peer in neighbours:
            node.send(peer, {"type": "flood", "message": body["message"]})
    node.reply(body, src, {"type": "broadcast_ok"})


@node.on("flood")
def flood(body: Body, src: str) -> None:
    if body["message"] not in seen:
        add(body["message"])
        for peer in neighbours:
            if peer != src:
                node.send(peer, {"type": "flood", "message": body["message"]})


@node.on("add")
def add_element(body: Body, src: str) -> None:
    add(body["element"])
    node.reply(body, src, {"type": "add_ok"})


@node.on("read")
def read(body: Body, src: str) -> None:
    node.reply(body, src, {"type": "read_ok", "messages": sorted(seen), "value": sorted(seen)})


@node.on("gossip")
def gossip_in(body: Body, src: str) -> None:
    for element in body["elements"]:
        add(element)


def gossip() -> None:
    if mode in ("drop", "local"):
        return
    for peer in node.others():
        node.send(peer, {"type": "gossip", "elements": sorted(seen)})


node.every(0.05, gossip)
node.run()
