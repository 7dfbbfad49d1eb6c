"""kafka with one leader (the first of init's node_ids) that keeps every log and committed offset
on disk before it answers: the other nodes forward each request to it and relay its answer; a
request the network delivers twice (from a client or forwarded, before or after a restart) is
applied once. PAGE=n: a poll returns at most n messages of a key (as Maelstrom allows);
HOLD=s: polls return nothing for the first s seconds (no recency is required).
MODE=forget: the leader acknowledges every third send with an offset but never stores the
message (a lost write)."""

import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", ".."))
from tests.check.nodes.maelnode import Body, Node, load, save

node = Node()
state = load({"logs": {}, "next": {}, "committed": {}, "sends": 0, "done": []})
mode = os.environ.get("MODE", "")
page = int(os.environ.get("PAGE", "0")) or None
hold = float(os.environ.get("HOLD", "0"))
done = set(state["done"])  # "client msg_id" of every request applied: a copy is not applied again


def apply(body: Body) -> Body:
    kind = body["type"]
    if kind == "send":
        key = body["key"]
        offset = state["next"].get(key, 0)
        state["next"][key] = offset + 1
        state["sends"] += 1
        if not (mode == "forget" and state["sends"] % 3 == 0):
            state["logs"].setdefault(key, []).append([offset, body["msg"]])
        save(state)
        return {"type": "send_ok", "offset": offset}
    if kind == "poll":
        msgs: dict[str, list[list[Any]]] = {}
        if time.monotonic() < started + hold:
            return {"type": "poll_ok", "msgs": msgs}
        for key, start in body["offsets"].items():
            pairs = [p for p in state["logs"].get(key, []) if p[0] >= start][:page]
            if pairs:
                msgs[key] = pairs
        return {"type": "poll_ok", "msgs": msgs}
    if kind == "commit_offsets":
        for key, offset in body["offsets"].items():
            state["committed"][key] = max(offset, state["committed"].get(key, -1))
        save(state)
        return {"type": "commit_offsets_ok"}
    known = {k: state["committed"][k] for k in body["keys"] if k in state["committed"]}
    return {"type": "list_committed_offsets_ok", "offsets": known}


def serve(body: Body, src: str) -> None:
    leader = node.ids[0]
    if node.id == leader:
        asked = body.get("asked", f"{src} {body['msg_id']}")
        if asked in done:
            return
        done.add(asked)
        state["done"].append(asked)
        node.reply(body, src, apply(body))
        return

    def relay(reply: Body) -> None:
        node.reply(body, src, {k: v for k, v in reply.items() if k not in ("msg_id", "in_reply_to", "asked")})

    request = {k: v for k, v in body.items() if k != "msg_id"}
    node.rpc(leader, {**request, "asked": f"{src} {body['msg_id']}"}, relay)


started = time.monotonic()  # the process starts just before its init
for kind in ("send", "poll", "commit_offsets", "list_committed_offsets"):
    node.on(kind)(serve)
node.run()
