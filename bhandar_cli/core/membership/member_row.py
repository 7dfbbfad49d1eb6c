"""The shape of one row of a node's membership table, as tools read it (the `members` view).

It is a module of its own so that it stays Python in the compiled build (bhandar_cli/native.py
`EXCLUDED`): mypyc makes every key of a compiled TypedDict required, dropping `total=False`,
and the views' shape check (tests/client/test_view_shapes.py) reads which keys are required at
run time."""

from __future__ import annotations

from typing import Required, TypedDict


class MemberRow(TypedDict, total=False):
    """A row of a node's membership table (the `members` view, on the wire as it is). A node
    without gossip says `id`, `up` and `status` only; with `placement` asked, a row also says
    where the member is (`token_positions`, `http`); a node process adds `protocol`."""

    id: Required[str]
    up: Required[bool]
    status: Required[str]  # normal | joining | leaving | left
    zone: str
    generation: int
    heartbeat: int
    phi: float
    tokens: int
    address: str
    heard: bool
    rtt_ms: float | None
    silent_s: float | None  # how long it has heard nothing of the member (None: itself, never)
    down_after_s: float | None  # after how much silence its detector calls the member down
    removed: bool
    token_positions: list[int]
    http: str
    protocol: int | None  # node processes: the wire protocol it speaks, as its hello said
