"""The dependencies a transactional history shows, for check/elle.py to search for cycles:
txn-list-append's and txn-rw-register's version orders, who read whose writes, and the anomalies
a single read shows (G1a, G1b, internal, incompatible-order, duplicate-elements, garbage-read).

list-append shows the version order outright: every read returns the whole list, so the longest
read of a key orders every element in it, and the others must be its prefixes. rw-register
shows it only where a transaction read a key and then wrote it (the write follows the read, as
Maelstrom's checker infers it), and the first version, nil, precedes every write. Values written
to a key are unique, so a read names its writer.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

from bhandar_cli.check.elle import Analysis, Anomaly, Graph, Txn, analyse


def _k(value: Any) -> str:
    """A JSON value as a hashable, comparable key (keys and elements may be any JSON)."""
    return json.dumps(value, sort_keys=True)


def _show(value: Any) -> str:
    return "nil" if value is None else json.dumps(value)


def list_append(txns: Sequence[Txn], realtime: bool = False) -> Analysis:
    """The anomalies of a txn-list-append history."""
    analysis = Analysis()
    graph = Graph()
    writer: dict[tuple[str, str], Txn] = {}  # (key, element) -> its appender (ok or info)
    failed: dict[tuple[str, str], Txn] = {}
    appends: dict[int, dict[str, list[str]]] = {}  # txn -> key -> its elements, in order
    for t in txns:
        for f, k, v in t.mops:
            if f == "append":
                (failed if t.status == "fail" else writer)[(_k(k), _k(v))] = t
                appends.setdefault(t.id, {}).setdefault(_k(k), []).append(_k(v))
    reads: dict[str, list[tuple[Txn, list[str]]]] = {}  # key -> (reader, the elements it read)
    for t in txns:
        if t.status != "ok":
            continue
        _internal_list(t, analysis)
        for f, k, v in t.mops:
            if f != "r":
                continue
            elements = [_k(e) for e in (v or [])]
            reads.setdefault(_k(k), []).append((t, elements))
            _bad_reads(t, k, elements, v, writer, failed, appends, analysis)
    for key, seen in reads.items():
        order = max((e for _, e in seen), key=len)
        longest = next(t for t, e in seen if e is order)
        for a, b in pairwise(order):
            wa, wb = writer.get((key, a)), writer.get((key, b))
            if wa is not None and wb is not None:
                graph.link(wa.id, "ww", wb.id, f"key {key}: {a} then {b}")
        reported = False
        for reader, elements in seen:
            if order[: len(elements)] != elements:
                if not reported:
                    reported = True
                    analysis.add(
                        Anomaly(
                            "incompatible-order",
                            (longest.id, reader.id),
                            f"#{longest.id} read key {key} as {_list(order)} and #{reader.id} as "
                            f"{_list(elements)}: neither is a prefix of the other.",
                        )
                    )
                continue
            if elements:
                last = writer.get((key, elements[-1]))
                if last is not None:
                    graph.link(last.id, "wr", reader.id, f"key {key}: read {_list(elements)}")
            if len(elements) < len(order):
                nxt = writer.get((key, order[len(elements)]))
                if nxt is not None:
                    graph.link(
                        reader.id,
                        "rw",
                        nxt.id,
                        f"key {key}: read {_list(elements)}, missed {order[len(elements)]}",
                    )
    return analyse(graph, analysis, txns, realtime)


def _list(elements: Sequence[str]) -> str:
    return "[" + ", ".join(elements) + "]"


def _bad_reads(
    t: Txn,
    k: Any,
    elements: list[str],
    raw: Any,
    writer: dict[tuple[str, str], Txn],
    failed: dict[tuple[str, str], Txn],
    appends: dict[int, dict[str, list[str]]],
    analysis: Analysis,
) -> None:
    key = _k(k)
    if len(set(elements)) != len(elements):
        analysis.add(Anomaly("duplicate-elements", (t.id,), f"#{t.id} read key {key} as {_show(raw)}."))
    aborted: dict[int, list[str]] = {}  # failed txn -> its elements this read holds
    garbage: list[str] = []
    for e in elements:
        if (key, e) in writer:
            continue
        if (key, e) in failed:
            aborted.setdefault(failed[(key, e)].id, []).append(e)
        else:
            garbage.append(e)
    for bad, held in aborted.items():
        analysis.add(
            Anomaly(
                "G1a",
                (t.id, bad),
                f"#{t.id} read key {key} as {_show(raw)}, holding {', '.join(held)} appended by #{bad}, "
                "which failed.",
            )
        )
    if garbage:
        analysis.add(
            Anomaly(
                "garbage-read",
                (t.id,),
                f"#{t.id} read key {key} as {_show(raw)}: nobody appended {', '.join(garbage)}.",
            )
        )
    if elements:
        last = writer.get((key, elements[-1]))
        if last is not None and last.id != t.id:
            mine = appends.get(last.id, {}).get(key, [])
            if mine and mine[-1] != elements[-1]:
                analysis.add(
                    Anomaly(
                        "G1b",
                        (t.id, last.id),
                        f"#{t.id} read key {key} as {_show(raw)}, ending at {elements[-1]}, which #{last.id} "
                        f"followed with {mine[-1]} in the same transaction.",
                    )
                )


def _internal_list(t: Txn, analysis: Analysis) -> None:
    known: dict[str, list[str]] = {}  # key -> its value as this txn must now see it
    pending: dict[str, list[str]] = {}  # key -> appended before any read of it
    for f, k, v in t.mops:
        key = _k(k)
        if f == "append":
            if key in known:
                known[key].append(_k(v))
            else:
                pending.setdefault(key, []).append(_k(v))
        elif f == "r":
            got = [_k(e) for e in (v or [])]
            mine = pending.pop(key, [])
            expected = known.get(key)
            wrong = (expected is not None and got != expected) or (
                expected is None and mine and got[len(got) - len(mine) :] != mine
            )
            if wrong:
                want = _list(expected) if expected is not None else f"a list ending {_list(mine)}"
                analysis.add(
                    Anomaly(
                        "internal",
                        (t.id,),
                        f"#{t.id} read key {key} as {_show(v)} where its own earlier operations make it "
                        f"{want}.",
                    )
                )
            known[key] = got


def rw_register(txns: Sequence[Txn], realtime: bool = False) -> Analysis:
    """The anomalies of a txn-rw-register history."""
    analysis = Analysis()
    graph = Graph()
    writer: dict[tuple[str, str], Txn] = {}
    failed: dict[tuple[str, str], Txn] = {}
    writes: dict[int, dict[str, list[str]]] = {}  # txn -> key -> values it wrote, in order
    writers_of: dict[str, list[Txn]] = {}  # key -> its writers (ok or info)
    for t in txns:
        for f, k, v in t.mops:
            if f == "w":
                (failed if t.status == "fail" else writer)[(_k(k), _k(v))] = t
                writes.setdefault(t.id, {}).setdefault(_k(k), []).append(_k(v))
                if t.status != "fail":
                    writers_of.setdefault(_k(k), []).append(t)
    readers: dict[tuple[str, str], list[Txn]] = {}  # (key, value) -> its external readers
    follows: list[tuple[Txn, str, str, str]] = []  # (txn, key, value read, value then written)
    for t in txns:
        if t.status != "ok":
            continue
        external = _external_reads(t, analysis)
        for key, value in external.items():
            readers.setdefault((key, value), []).append(t)
            mine = writes.get(t.id, {}).get(key)
            if mine:
                follows.append((t, key, value, mine[-1]))
            if value == "null":
                continue
            source = writer.get((key, value))
            if source is None:
                if (key, value) in failed:
                    bad = failed[(key, value)]
                    analysis.add(
                        Anomaly(
                            "G1a",
                            (t.id, bad.id),
                            f"#{t.id} read key {key} = {value}, written by #{bad.id}, which failed.",
                        )
                    )
                else:
                    analysis.add(
                        Anomaly(
                            "garbage-read", (t.id,), f"#{t.id} read key {key} = {value}: nobody wrote it."
                        )
                    )
                continue
            if source.id != t.id:
                graph.link(source.id, "wr", t.id, f"key {key}: read {value}")
                theirs = writes[source.id][key]
                if theirs[-1] != value:
                    analysis.add(
                        Anomaly(
                            "G1b",
                            (t.id, source.id),
                            f"#{t.id} read key {key} = {value}, which #{source.id} overwrote with "
                            f"{theirs[-1]} in the same transaction.",
                        )
                    )
    # The version order: nil before every write; a transaction's write after what it read.
    for (key, value), who in readers.items():
        if value != "null":
            continue
        for reader in who:
            for w in writers_of.get(key, []):
                graph.link(reader.id, "rw", w.id, f"key {key}: read nil, missed {writes[w.id][key][-1]}")
    for t, key, value, wrote in follows:
        if value == "null":
            continue
        source = writer.get((key, value))
        if source is not None:
            graph.link(source.id, "ww", t.id, f"key {key}: {value} then {wrote}")
        for other in readers.get((key, value), []):
            graph.link(other.id, "rw", t.id, f"key {key}: read {value}, missed {wrote}")
    return analyse(graph, analysis, txns, realtime)


def _external_reads(t: Txn, analysis: Analysis) -> dict[str, str]:
    """Each key's value as `t` first read it before writing it; an internal anomaly for a later
    read that disagrees with the transaction's own reads and writes."""
    external: dict[str, str] = {}
    known: dict[str, str] = {}
    for f, k, v in t.mops:
        key, value = _k(k), _k(v)
        if f == "w":
            known[key] = value
        elif f == "r":
            if key in known and known[key] != value:
                analysis.add(
                    Anomaly(
                        "internal",
                        (t.id,),
                        f"#{t.id} read key {key} = {_show(v)} where its own earlier operations make it "
                        f"{known[key]}.",
                    )
                )
            if key not in known:
                external[key] = value
            known[key] = value
    return external
