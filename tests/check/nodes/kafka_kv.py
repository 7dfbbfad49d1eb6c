"""kafka on a key-value service, as Gossip Glomers #5b invites: each key's log is one value of the
service (a list of messages; an offset is a place in it), appended to by read and compare-and-set,
retried when another node appended first; committed offsets are values of the service too, raised
by compare-and-set. Nodes keep nothing themselves. KV=seq-kv: the sequentially consistent service
(reads may be stale, across nodes: polls and committed offsets lag, as that service allows)."""

import os
import sys
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", ".."))
from tests.check.nodes.maelnode import Body, Node

node = Node()
kv = os.environ.get("KV", "lin-kv")


def read(key: str, then: Callable[[Any], None]) -> None:
    """The service's value of `key` (None when it has none) to `then`."""
    node.rpc(
        kv, {"type": "read", "key": key}, lambda r: then(r.get("value") if r["type"] == "read_ok" else None)
    )


def update(key: str, change: Callable[[Any], Any], then: Callable[[Any, Any], None]) -> None:
    """Replace the value of `key` by change(value) with compare-and-set, retried until it holds;
    then(old, new). change returning the old value writes nothing."""

    def attempt(old: Any) -> None:
        new = change(old)
        if new == old:
            then(old, new)
            return
        body = {"type": "cas", "key": key, "from": old, "to": new, "create_if_not_exists": old is None}
        node.rpc(kv, body, lambda r: then(old, new) if r["type"] == "cas_ok" else read(key, attempt))

    read(key, attempt)


@node.on("send")
def send(body: Body, src: str) -> None:
    update(
        f"log {body['key']}",
        lambda log: [*(log or []), body["msg"]],
        lambda old, new: node.reply(body, src, {"type": "send_ok", "offset": len(new) - 1}),
    )


@node.on("poll")
def poll(body: Body, src: str) -> None:
    wanted = dict(body["offsets"])
    msgs: dict[str, list[list[Any]]] = {}

    def one(key: str) -> Callable[[Any], None]:
        def got(log: Any) -> None:
            start = wanted[key]
            if log and start < len(log):
                msgs[key] = [[i, log[i]] for i in range(start, len(log))]
            del wanted[key]
            if not wanted:
                node.reply(body, src, {"type": "poll_ok", "msgs": msgs})

        return got

    if not wanted:
        node.reply(body, src, {"type": "poll_ok", "msgs": {}})
    for key in list(wanted):
        read(f"log {key}", one(key))


@node.on("commit_offsets")
def commit(body: Body, src: str) -> None:
    left = set(body["offsets"])
    if not left:
        node.reply(body, src, {"type": "commit_offsets_ok"})

    def one(key: str) -> Callable[[Any, Any], None]:
        def done(old: Any, new: Any) -> None:
            left.discard(key)
            if not left:
                node.reply(body, src, {"type": "commit_offsets_ok"})

        return done

    def raise_to(offset: int) -> Callable[[Any], Any]:
        return lambda old: max(offset, old if old is not None else -1)

    for key, offset in body["offsets"].items():
        update(f"committed {key}", raise_to(offset), one(key))


@node.on("list_committed_offsets")
def committed(body: Body, src: str) -> None:
    left = set(body["keys"])
    offsets: dict[str, int] = {}
    if not left:
        node.reply(body, src, {"type": "list_committed_offsets_ok", "offsets": {}})

    def one(key: str) -> Callable[[Any], None]:
        def got(value: Any) -> None:
            if value is not None:
                offsets[key] = value
            left.discard(key)
            if not left:
                node.reply(body, src, {"type": "list_committed_offsets_ok", "offsets": offsets})

        return got

    for key in body["keys"]:
        read(f"committed {key}", one(key))


node.run()
