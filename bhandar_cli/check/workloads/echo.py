"""echo: a client sends `echo` with a payload and expects `echo_ok` with the same payload back.

Checker: every answered echo carried back exactly what was sent.
"""

from __future__ import annotations

from random import Random
from typing import Any

from bhandar_cli.check.catalog import WORKLOADS
from bhandar_cli.check.maelstrom_history import MaelstromHistory, MaelstromOperation, Problem, Verdict, judged
from bhandar_cli.check.maelstrom_workload import MaelstromWorkload, named, require


class Echo(MaelstromWorkload):
    name = "echo"
    doc = WORKLOADS[name]

    def next_op(self, rng: Random, client: int) -> tuple[str, Any]:
        return "echo", f"Please echo {self.unique()}"

    def request(self, f: str, value: Any) -> dict[str, Any]:
        return {"type": "echo", "echo": value}

    def parse(self, f: str, body: dict[str, Any]) -> Any:
        return require(body, "echo")

    def show(self, op: MaelstromOperation) -> str:
        back = "" if op.type != "ok" else f" -> {op.result!r}"
        return f"echo {op.value!r}{back}" + ("" if op.type == "ok" else f" -> {op.error or op.type}")

    def check(self, history: MaelstromHistory) -> Verdict:
        problems = [
            Problem("wrong-echo", f"{named(op, self.show(op))} came back different.", (op.index,))
            for op in history.ops
            if op.ok and op.result != op.value
        ]
        answered = sum(1 for op in history.ops if op.ok)
        stats = {"echoes": answered}
        return judged(problems, f"All {answered} answered echoes carried back what was sent.", stats)
