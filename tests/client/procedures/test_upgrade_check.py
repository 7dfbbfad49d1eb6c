"""The upgrade's check step (client_upgrade.check_step) against a backend whose views are scripted:
a node the client sees down is refused at once; one that runs but that a peer's gossip still calls
down (it was started a moment ago) is waited for, within a bound."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from bhandar_cli.client.procedures.upgrade import REJOIN_TIMEOUT, check_step
from bhandar_cli.core.membership.ring import Ring
from bhandar_cli.core.model.errors import Refused

NAMES = ["A", "B", "C", "D", "E"]


class ScriptedBackend:
    """Five nodes; `alive` is the client's view, and peers call D down until `seen_up_at`."""

    def __init__(self, alive: set[str], seen_up_at: float) -> None:
        self.names = NAMES
        self.ring = Ring.build(NAMES, 8)
        self.alive = alive
        self.seen_up_at = seen_up_at
        self.asked = 0

    def is_alive(self, name: str) -> bool:
        return name in self.alive

    async def node_members(self, peer: str) -> list[dict[str, Any]]:
        self.asked += 1
        d_up = peer == "D" or trio.current_time() >= self.seen_up_at
        return [{"id": n, "status": "normal", "up": d_up if n == "D" else True} for n in NAMES]


def run_check(backend: ScriptedBackend) -> tuple[float, BaseException | None]:
    async def main() -> tuple[float, BaseException | None]:
        started = trio.current_time()
        try:
            await check_step(backend, "A", 3)  # type: ignore[arg-type]
        except Refused as error:
            return trio.current_time() - started, error
        return trio.current_time() - started, None

    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_a_node_just_started_is_waited_for_until_its_peers_see_it_up() -> None:
    took, error = run_check(ScriptedBackend(set(NAMES), seen_up_at=2.0))
    assert error is None
    assert 2.0 <= took < 2.5, took


def test_a_node_the_client_sees_down_is_refused_at_once() -> None:
    took, error = run_check(ScriptedBackend(set(NAMES) - {"D"}, seen_up_at=float("inf")))
    assert isinstance(error, Refused) and "D is down (seen by this client, A, B, C, E)" in str(error), error
    assert took == 0.0


def test_a_node_its_peers_never_see_up_is_refused_after_the_bound() -> None:
    backend = ScriptedBackend(set(NAMES), seen_up_at=float("inf"))
    took, error = run_check(backend)
    assert isinstance(error, Refused) and "D is down (seen by A, B, C, E)" in str(error), error
    assert took == pytest.approx(REJOIN_TIMEOUT, abs=0.2)
    assert backend.asked < 5 * (REJOIN_TIMEOUT / 0.1 + 2)  # polled, not spun
