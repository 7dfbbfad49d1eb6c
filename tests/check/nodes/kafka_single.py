"""kafka as Gossip Glomers #5a asks: one node, everything in memory, no library. Each key's log
is a list; an offset is the message's place in it."""

import json
import sys
from typing import Any

logs: dict[str, list[object]] = {}
committed: dict[str, int] = {}
me = ""


def answer(request: dict[str, Any], body: dict[str, Any]) -> None:
    body["in_reply_to"] = request["body"]["msg_id"]
    print(json.dumps({"src": me, "dest": request["src"], "body": body}), flush=True)


for line in sys.stdin:
    msg = json.loads(line)
    body = msg["body"]
    kind = body["type"]
    if kind == "init":
        me = body["node_id"]
        answer(msg, {"type": "init_ok"})
    elif kind == "send":
        log = logs.setdefault(body["key"], [])
        log.append(body["msg"])
        answer(msg, {"type": "send_ok", "offset": len(log) - 1})
    elif kind == "poll":
        msgs: dict[str, list[list[Any]]] = {}
        for key, start in body["offsets"].items():
            log = logs.get(key, [])
            if start < len(log):
                msgs[key] = [[i, log[i]] for i in range(start, len(log))]
        answer(msg, {"type": "poll_ok", "msgs": msgs})
    elif kind == "commit_offsets":
        committed.update(body["offsets"])
        answer(msg, {"type": "commit_offsets_ok"})
    elif kind == "list_committed_offsets":
        offsets = {k: committed[k] for k in body["keys"] if k in committed}
        answer(msg, {"type": "list_committed_offsets_ok", "offsets": offsets})
