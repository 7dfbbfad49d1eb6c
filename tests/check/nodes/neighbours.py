"""broadcast: messages kept on disk before the ack and gossiped (the whole set, every 50 ms) only
to the neighbours `topology` named, which this node keeps in memory, as Maelstrom's demo nodes
do: a node restarted without a new `topology` has no one to tell what it is told."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", ".."))
from tests.check.nodes.maelnode import Body, Node, load, save

node = Node()
seen = set(load([]))
neighbours: list[str] = []


def add(elements: list[int]) -> None:
    fresh = set(elements) - seen
    if fresh:
        seen.update(fresh)
        save(sorted(seen))


@node.on("topology")
def topology(body: Body, src: str) -> None:
    neighbours[:] = body["topology"].get(node.id, [])
    node.reply(body, src, {"type": "topology_ok"})


@node.on("broadcast")
def broadcast(body: Body, src: str) -> None:
    add([body["message"]])
    node.reply(body, src, {"type": "broadcast_ok"})


@node.on("read")
def read(body: Body, src: str) -> None:
    node.reply(body, src, {"type": "read_ok", "messages": sorted(seen)})


@node.on("gossip")
def gossip_in(body: Body, src: str) -> None:
    add(body["elements"])


def gossip() -> None:
    for peer in neighbours:
        node.send(peer, {"type": "gossip", "elements": sorted(seen)})


node.every(0.05, gossip)
node.run()
