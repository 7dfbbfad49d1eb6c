"""unique-ids: `generate` asks a node for an id; `generate_ok` carries one (any JSON value).

Checker: no two acknowledged generates got the same id (ids compare as JSON: 1 and 1.0 are
different texts, and so different ids).
"""

from __future__ import annotations

import json
from random import Random
from typing import Any

from bhandar_cli.check.catalog import WORKLOADS
from bhandar_cli.check.maelstrom_history import MaelstromHistory, MaelstromOperation, Problem, Verdict, judged
from bhandar_cli.check.maelstrom_workload import MaelstromWorkload, named, require


class UniqueIds(MaelstromWorkload):
    name = "unique-ids"
    doc = WORKLOADS[name]

    def next_op(self, rng: Random, client: int) -> tuple[str, Any]:
        return "generate", None

    def request(self, f: str, value: Any) -> dict[str, Any]:
        return {"type": "generate"}

    def parse(self, f: str, body: dict[str, Any]) -> Any:
        return require(body, "id")

    def show(self, op: MaelstromOperation) -> str:
        return f"generate -> {json.dumps(op.result) if op.ok else op.error or op.type}"

    def check(self, history: MaelstromHistory) -> Verdict:
        first: dict[str, MaelstromOperation] = {}
        problems = []
        for op in history.ops:
            if not op.ok:
                continue
            text = json.dumps(op.result, sort_keys=True)
            earlier = first.setdefault(text, op)
            if earlier is not op:
                problems.append(
                    Problem(
                        "duplicate-id",
                        f"id {text} was handed out twice: {named(earlier, 'generate')} and "
                        f"{named(op, 'generate')}.",
                        (earlier.index, op.index),
                    )
                )
        stats = {"ids": len(first)}
        return judged(problems, f"All {len(first)} acknowledged ids were distinct.", stats)
