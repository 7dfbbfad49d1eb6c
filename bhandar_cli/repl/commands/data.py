"""REPL data commands: put, get, delete, incr and keyspace, declared with their handlers."""

from __future__ import annotations

from typing import Any

from bhandar_cli.client import GetOutcome, IncrOutcome, KeyspacesView, WriteOutcome
from bhandar_cli.core.model import (
    KEYSPACE_NAME_RULE,
    MAX_KEYSPACES,
    BadInput,
    NotJson,
    parse_json,
    parse_value_text,
)
from bhandar_cli.repl.kinds import (
    CONTEXT,
    INTEGER,
    KEY,
    KEYSPACE,
    LEVEL,
    NEW_KEYSPACE,
    NODE,
    POLICY,
    QUORUM_MODE,
    REPLICAS,
    REQUEST_ID,
    TTL,
    VALUE,
    keyword,
)
from bhandar_cli.repl.session import Session
from bhandar_cli.repl.table import Arg, Command, CommandTable, Option, Word
from bhandar_cli.repl.views_data import render_get, render_incr, render_keyspaces, render_write

TABLE: CommandTable[Session] = CommandTable()

KS_KEY = (Arg(KEYSPACE), Arg(KEY))
CTX = Option("ctx", CONTEXT)
VIA = Option("via", NODE)
LEVEL_SHORT = Option("c", LEVEL, metavar="...")  # keeps the longer usage lines on one line


@TABLE.command(
    "put",
    "write a value (a JSON literal, else a bare string)",
    args=(*KS_KEY, Arg(VALUE)),
    options=(CTX, Option("c", LEVEL), VIA),
    aliases=("set",),
    help="""VALUE is a JSON literal when it parses as one, else a bare string (with a warning when
    it starts like JSON, with {, [ or ", but does not parse); shell-style quoting applies.
    ctx=auto (the default) writes with the context of this session's last get of the key, else
    none (a blind write); a CONTEXT is the context string a get printed. c= sets the consistency
    level of this write (default: the session's, see consistency); via= sends it to that node
    (default: the first live replica of the key); a node that is not a replica of the key forwards
    the write to one, and the reply says who coordinated and why (forwarded_by and note in JSON).""",
    examples=("put kv cart:42 '[\"rice\"]'", 'put kv cart:42 \'["rice","oil"]\' via=A c=ONE'),
    renderer=render_write,
)
async def put(session: Session, cmd: Command) -> WriteOutcome:
    value = parse_value_text(_value_text(cmd.args[2]))
    o = cmd.options
    outcome = await session.client.data.put(
        cmd.arg(0), cmd.arg(1), value.data, value.ctype, o.get("ctx"), o.get("c"), o.get("via")
    )
    return outcome.warned(value.warning)


@TABLE.command(
    "get",
    "read every sibling and the causal context",
    args=KS_KEY,
    options=(Option("c", LEVEL), VIA),
    help="""Reads the key from as many replicas as the level needs and shows every sibling with its
    dot and version vector, and the context the next put or delete of the key writes back with.
    At c=ONE a replica of the key answers from its own copy alone and asks no other, so the read is
    fast, may be stale and repairs nothing (anti-entropy or a read at QUORUM or ALL does); through
    a node that holds no copy, ONE asks every replica and answers with the first reply. For a
    counter keyspace get returns values: [N], one merged number, and the P/N table per replica.
    A key holds at most 100 live siblings: a put that would add one more is refused. Merges between
    replicas (read repair, anti-entropy, hints, streams) never drop a sibling a replica acknowledged,
    so they can take a key past the limit; then get warns (warnings in the JSON reply), status lists
    the key and the metric bhandar_sibling_limit_exceeded counts it. Read the key, merge its siblings
    and write back with the context.""",
    examples=("get kv cart:42", "get kv cart:42 c=ALL"),
    renderer=render_get,
)
async def get(session: Session, cmd: Command) -> GetOutcome:
    o = cmd.options
    return await session.client.data.get(cmd.arg(0), cmd.arg(1), o.get("c"), o.get("via"))


@TABLE.command(
    "delete",
    "delete what a get saw (writes a tombstone)",
    args=KS_KEY,
    options=(CTX, LEVEL_SHORT, VIA),
    aliases=("del",),
    help="""A delete is a write: a tombstone that carries the causal context, so a replica that
    missed it cannot bring the value back. ctx=auto (the default) deletes what this session's last
    get of the key saw, else reads the key first and deletes what the read found, and prints what
    it removed. ctx=none is a blind tombstone: it covers no version, so every value already stored
    survives it (a warning says so). c= and via= as for put.""",
    examples=("delete kv cart:42", "delete kv cart:42 ctx=none"),
    renderer=render_write,
)
async def delete(session: Session, cmd: Command) -> WriteOutcome:
    o = cmd.options
    return await session.client.data.delete(cmd.arg(0), cmd.arg(1), o.get("ctx"), o.get("c"), o.get("via"))


@TABLE.command(
    "incr",
    "add to a PN-Counter (a retried id counts once)",
    args=(*KS_KEY, Arg(INTEGER, "DELTA", optional=True)),
    options=(Option("id", REQUEST_ID), LEVEL_SHORT, VIA),
    help="""Adds DELTA (default 1; a negative DELTA subtracts) to a counter in a counter keyspace such
    as counters. id= names the request: a retry with the same id is counted once (default: a new id
    per command).""",
    examples=("incr counters visits", "incr counters visits -3 id=r1"),
    renderer=render_incr,
)
async def incr(session: Session, cmd: Command) -> IncrOutcome:
    delta = _int(cmd.arg(2), "DELTA") if len(cmd.args) > 2 else 1
    o = cmd.options
    return await session.client.data.incr(
        cmd.arg(0), cmd.arg(1), delta, o.get("id"), o.get("c"), o.get("via")
    )


@TABLE.command(
    "keyspace",
    "create or list keyspaces",
    args=(Arg(keyword("create", "list")), Arg(NEW_KEYSPACE, optional=True)),
    options=(
        Option("policy", POLICY),
        Option("n", REPLICAS, metavar="3"),
        Option("quorum", QUORUM_MODE),
        Option("ttl", TTL, metavar="60s"),
    ),
    usage_template="{name} create NAME {options} | {name} list",
    help=f"""keyspace create sets a keyspace's conflict policy (siblings keeps concurrent writes side
    by side, lww keeps the last by timestamp, counter holds PN-Counters), its replication factor n
    (default: the cluster's) and its quorum mode (sloppy lets fallbacks stand in for down replicas,
    strict counts home replicas only). ttl (with policy=lww only) makes values expire: a read from
    the write's time plus ttl on finds nothing, and the expired value is deleted everywhere without
    a request (60s, 5m, 2h, 1d; default none). A keyspace must be created before it is used; kv (siblings)
    and counters (counter) exist from the start. A name is {KEYSPACE_NAME_RULE}; a cluster holds at
    most {MAX_KEYSPACES} keyspaces. keyspace list shows every keyspace.""",
    examples=(
        "keyspace create prices policy=lww",
        "keyspace create cache policy=lww n=2 ttl=60s",
        "keyspace list",
    ),
    renderer=render_keyspaces,
)
async def keyspace(session: Session, cmd: Command) -> KeyspacesView | dict[str, Any]:
    if cmd.keyword(0) == "list":
        return await session.client.views.keyspace_list()
    if len(cmd.args) != 2:
        raise BadInput(f"usage: {cmd.spec.usage}")
    given: dict[str, Any] = dict(cmd.options)  # the options are named as client.keyspace_create's
    if "n" in given:
        given["n"] = _int(given["n"], "n")
    return await session.client.admin.keyspace_create(cmd.arg(1), **given)


def _value_text(word: Word) -> str:
    """The raw word when it is JSON as typed (unquoted [\"a\"]), else the unquoted text."""
    try:
        parse_json(word.raw)
    except (NotJson, BadInput):
        return word.text
    return word.raw


def _int(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise BadInput(f"{what} must be an integer (got {text!r})") from None
