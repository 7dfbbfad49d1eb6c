"""The services nodes may call by name, as in Maelstrom: `lin-kv`, `seq-kv`, `lww-kv`, `lin-tso`.

Each is a key-value store with the lin-kv workload's API (`read`, `write`, `cas` with
`create_if_not_exists`; errors 20 key-does-not-exist and 22 precondition-failed) and a different
promise:

- `lin-kv` is linearizable: one map, every request applied in arrival order.
- `seq-kv` is sequentially consistent: a request that changes nothing (a read, a failed cas) may
  see any state from the one its caller last saw to the newest (the last `SEQ_BUFFER` states);
  a change always applies to the newest state. Each caller's view only moves forward.
- `lww-kv` is eventually consistent: `LWW_REPLICAS` independent replicas, each request served by
  one of them at random, with a random pair merged (last write wins by a Lamport clock) before
  every request. Reads can be stale and concurrent writes lost: built to be pathological.
- `lin-tso` hands out increasing integers (`ts` -> `ts_ok`).

All randomness comes from the `random.Random` handed in, so a seed repeats a run's choices.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from random import Random
from typing import Any

from bhandar_cli.check.protocol import KEY_MISSING, MALFORMED, NOT_SUPPORTED, PRECONDITION_FAILED, error_body

SEQ_BUFFER = 32
LWW_REPLICAS = 5

Kv = dict[str, Any]  # canonical key (JSON text) -> value
Service = Callable[[str, dict[str, Any]], dict[str, Any]]  # (caller, request body) -> answer body


def _key(body: dict[str, Any]) -> str:
    return json.dumps(body.get("key"), sort_keys=True)


def apply(kv: Kv, body: dict[str, Any]) -> tuple[Kv | None, dict[str, Any]]:
    """One request on a map: (the new map, or None if unchanged; the answer)."""
    kind = body.get("type")
    key = _key(body)
    if kind == "read":
        if key not in kv:
            return None, error_body(KEY_MISSING, "key does not exist")
        return None, {"type": "read_ok", "value": kv[key]}
    if kind == "write":
        if "value" not in body:
            return None, error_body(MALFORMED, 'write needs a "value"')
        return {**kv, key: body["value"]}, {"type": "write_ok"}
    if kind == "cas":
        if "from" not in body or "to" not in body:
            return None, error_body(MALFORMED, 'cas needs "from" and "to"')
        if key not in kv:
            if body.get("create_if_not_exists"):
                return {**kv, key: body["to"]}, {"type": "cas_ok"}
            return None, error_body(KEY_MISSING, "key does not exist")
        if kv[key] != body["from"]:
            return None, error_body(PRECONDITION_FAILED, f"current value {kv[key]!r} is not {body['from']!r}")
        return {**kv, key: body["to"]}, {"type": "cas_ok"}
    return None, error_body(NOT_SUPPORTED, f"this service does not know {kind!r} (read, write, cas)")


class LinKvService:
    def __init__(self) -> None:
        self.kv: Kv = {}

    def __call__(self, src: str, body: dict[str, Any]) -> dict[str, Any]:
        new, answer = apply(self.kv, body)
        if new is not None:
            self.kv = new
        return answer


class SeqKvService:
    def __init__(self, rng: Random) -> None:
        self.rng = rng
        self.states: list[Kv] = [{}]
        self.first = 0  # index of states[0] in the whole sequence
        self.seen: dict[str, int] = {}  # caller -> the newest state index it has seen

    def __call__(self, src: str, body: dict[str, Any]) -> dict[str, Any]:
        last = self.first + len(self.states) - 1
        low = max(self.seen.get(src, 0), self.first)
        index = self.rng.randint(low, last)
        new, answer = apply(self.states[index - self.first], body)
        if new is None:
            self.seen[src] = index
            return answer
        new, answer = apply(self.states[-1], body)  # a change applies to the newest state only
        if new is not None:
            self.states.append(new)
            last += 1
            if len(self.states) > SEQ_BUFFER:
                self.states.pop(0)
                self.first += 1
        self.seen[src] = last
        return answer


class LwwKvService:
    def __init__(self, rng: Random) -> None:
        self.rng = rng
        self.clock = 0
        self.replicas: list[dict[str, tuple[int, Any]]] = [{} for _ in range(LWW_REPLICAS)]

    def __call__(self, src: str, body: dict[str, Any]) -> dict[str, Any]:
        rng, replicas = self.rng, self.replicas
        a, b = rng.randrange(LWW_REPLICAS), rng.randrange(LWW_REPLICAS)
        merged = dict(replicas[b])
        for key, stamped in replicas[a].items():
            if key not in merged or merged[key][0] < stamped[0]:
                merged[key] = stamped
        replicas[b] = merged
        i = rng.randrange(LWW_REPLICAS)
        plain = {k: v for k, (_, v) in replicas[i].items()}
        new, answer = apply(plain, body)
        if new is not None:
            self.clock += 1
            key = _key(body)
            replicas[i] = {**replicas[i], key: (self.clock, new[key])}
        return answer


class LinTsoService:
    def __init__(self) -> None:
        self.next = 0

    def __call__(self, src: str, body: dict[str, Any]) -> dict[str, Any]:
        if body.get("type") != "ts":
            return error_body(NOT_SUPPORTED, "lin-tso answers ts only")
        self.next += 1
        return {"type": "ts_ok", "ts": self.next - 1}


def services(rng: Random) -> dict[str, Service]:
    return {
        "lin-kv": LinKvService(),
        "seq-kv": SeqKvService(Random(rng.getrandbits(64))),
        "lww-kv": LwwKvService(Random(rng.getrandbits(64))),
        "lin-tso": LinTsoService(),
    }
