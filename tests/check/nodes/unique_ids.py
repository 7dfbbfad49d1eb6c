"""unique-ids: node id and a counter kept on disk (so a restart does not reuse ids).
With BROKEN=1 in the environment (--bin 'env BROKEN=1 ...'), ids are the bare counter: two nodes
hand out the same ids."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", ".."))
from tests.check.nodes.maelnode import Body, Node, load, save

node = Node()
state = load({"next": 0})
broken = os.environ.get("BROKEN") == "1"


@node.on("generate")
def generate(body: Body, src: str) -> None:
    state["next"] += 1
    save(state)
    ident = state["next"] if broken else f"{node.id}-{state['next']}"
    node.reply(body, src, {"type": "generate_ok", "id": ident})


node.run()
