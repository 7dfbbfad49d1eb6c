"""txn-rw-register and txn-list-append ("w" and "append" micro-ops on one store), by MODE:
- (default) leader: every transaction runs on the first node of node_ids, the others forward it
  there (remembering what each client's request got, so a duplicate runs once); the store is on
  disk before the answer. One copy, one at a time: strict-serializable.
- local: each node runs transactions on its own store and tells nobody (Gossip Glomers #6a, run
  with one node).
- uncommitted: each node's own store, every write sent to the other nodes (Gossip Glomers #6b:
  read uncommitted, totally available).
- committed: each node's own store, a transaction's last write to each key sent to the other
  nodes as one group, applied at once (Gossip Glomers #6c: read committed, totally available).
  Not serializable: transactions on different nodes lose each other's updates (G-single, G2),
  and lists appended on two nodes at once end up in different orders (incompatible-order).
- stale: one store, but reads come from a copy of it taken every STALE_EVERY (with the
  transaction's own writes on top): no isolation between transactions (lost updates, G2, and
  stale reads of completed writes, G-single-realtime).
Writes go to the other nodes every REPLICATE_EVERY (lost to a partition, as the challenges
allow: they ask for total availability, not convergence).
"""

import os
import sys
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", ".."))
from tests.check.nodes.maelnode import Body, Node, load, save

node = Node()
mode = os.environ.get("MODE", "leader")
saved = load({"store": {}, "done": {}})
store: dict[str, Any] = saved["store"]  # key (as repr) -> value, or list for appends
done: dict[str, Body] = saved["done"]  # "client msg_id" -> the answer it got (leader: kept on disk)
REPLICATE_EVERY = 0.1  # seconds between two messages of writes to the other nodes (as gossip goes)
# stale: seconds between two copies reads come from; long enough that a run on a loaded machine,
# a few transactions a second, still reads writes completed before it began as missing.
STALE_EVERY = 1.0
outbox: list[list[list[Any]]] = []  # writes not yet sent to the others, each group applied at once


def key_of(k: Any) -> str:
    return repr(k)


snapshot: dict[str, Any] = dict(store)  # what reads see (stale)


def apply(mops: list[list[Any]], replicate: bool) -> list[list[Any]]:
    out = []
    mine: dict[str, Any] = {}  # stale: this transaction's own writes, as it must read them
    for f, k, v in mops:
        key = key_of(k)
        if f == "r":
            value = store.get(key) if mode != "stale" else mine.get(key, snapshot.get(key))
            out.append([f, k, list(value) if isinstance(value, list) else value])
            continue
        if f == "append":
            mine[key] = [*mine.get(key, snapshot.get(key, [])), v]
            store[key] = [*store.get(key, []), v]
        else:
            store[key] = mine[key] = v
        if replicate:
            outbox.append([[f, k, v]])
        out.append([f, k, v])
    return out


def last_writes(mops: list[list[Any]]) -> list[list[Any]]:
    """A transaction's effect: its appends, and each register's last write."""
    final: dict[str, list[Any]] = {}
    appends = []
    for f, k, v in mops:
        if f == "append":
            appends.append([f, k, v])
        elif f == "w":
            final[key_of(k)] = [f, k, v]
    return appends + list(final.values())


@node.on("replicate")
def replicate(body: Body, src: str) -> None:
    for writes in body["groups"]:
        apply(writes, False)


def refresh() -> None:
    snapshot.clear()
    snapshot.update(store)


def flush() -> None:
    if outbox:
        for peer in node.others():
            node.send(peer, {"type": "replicate", "groups": outbox})
        outbox.clear()


@node.on("txn")
def txn(body: Body, src: str) -> None:
    if mode == "leader" and node.id != node.ids[0]:
        request = {"type": "txn", "txn": body["txn"], "client": src, "client_msg": body["msg_id"]}

        def answer(reply: Body) -> None:
            node.reply(body, src, {k: v for k, v in reply.items() if k not in ("msg_id", "in_reply_to")})

        node.rpc(node.ids[0], request, answer)
        return
    asked = f"{body.get('client', src)} {body.get('client_msg', body['msg_id'])}"
    if asked in done:
        node.reply(body, src, done[asked])
        return
    result = apply(body["txn"], mode == "uncommitted")
    if mode == "committed":
        outbox.append(last_writes(result))
    done[asked] = {"type": "txn_ok", "txn": result}
    if mode == "leader":
        save({"store": store, "done": done})
    node.reply(body, src, done[asked])


node.every(REPLICATE_EVERY, flush)
node.every(STALE_EVERY, refresh)
node.run()
