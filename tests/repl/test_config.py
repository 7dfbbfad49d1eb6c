"""Staged configuration in process (virtual time): `config set` rolls a change out one node at a
time, watched; a value that makes requests fail stops at the first node and is rolled back there;
a good one reaches every node and `config show` reports it; a bad key or value changes nothing."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from bhandar_cli.client.openers import ClusterOptions
from bhandar_cli.core.model.errors import Unavailable
from bhandar_cli.repl.batch import open_session
from tests.repl.conftest import run_lines

Run = Any


def test_a_bad_value_stops_after_the_first_node_and_is_rolled_back() -> None:
    events: list[dict[str, Any]] = []

    async def main() -> dict[str, Any]:
        async with open_session(ClusterOptions(memory=True), "json") as session:
            client = session.client
            with pytest.raises(Unavailable) as stopped:
                await client.admin.config_set("request_timeout", "0.001", events.append)
            shown = await client.admin.config_show()
            return {"error": str(stopped.value), "shown": shown}

    out = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    text = out["error"]
    assert "stopped at A and rolled it back to version 0" in text and "probes failed" in text, text
    applied = [e["node"] for e in events if e["phase"] == "apply"]
    assert applied == ["A"], events  # B..E never saw the value
    rollback = next(e for e in events if e["phase"] == "rollback")
    assert "probes failed" in rollback["regressed"]
    recovered = next(e for e in events if e["phase"] == "recovered")
    assert recovered["errors"] == 0, recovered  # A's errors stopped once it was back
    shown = out["shown"]
    assert shown["agreed"] and shown["version"] == 0
    assert {r["node"]: r["values"]["request_timeout"] for r in shown["nodes"]} == dict.fromkeys("ABCDE", 1.0)


def test_a_good_value_reaches_every_node_and_config_show_reports_it(repl: Run) -> None:
    out = repl(
        [
            "config show",
            "config set phi_threshold 10 window=1s",
            "config show",
            "get kv k",
            "kill C",
            "revive C",
            "add F",
            "config show",
        ]
    )
    before, rollout, after = out[0], out[1], out[2]
    assert before["version"] == 0 and before["set"] == {} and before["values"]["phi_threshold"] == 8.0
    assert rollout["ok"] and rollout["version"] == 1 and rollout["value"] == 10.0
    assert [r["node"] for r in rollout["nodes"]] == ["A", "B", "C", "D", "E"]
    assert all(r["after"]["errors"] == 0 and r["after"]["probes"] > 5 for r in rollout["nodes"])
    assert after["agreed"] and after["version"] == 1 and after["set"] == {"phi_threshold": 10.0}
    assert all(r["version"] == 1 and r["values"]["phi_threshold"] == 10.0 for r in after["nodes"])
    assert out[3]["ok"]
    # A node restarted comes back with the version; a node added starts with it.
    again = {r["node"]: r["version"] for r in out[7]["nodes"]}
    assert again == dict.fromkeys("ABCDEF", 1) and out[7]["agreed"], out[7]


def test_a_node_that_stops_gossiping_is_seen_down_and_rolled_back(repl: Run) -> None:
    # Gossip every 10 s: A's heartbeat stalls and its peers call it down within the failure
    # detector's bound (~4.5 s), inside the 6 s window. (A low phi threshold makes peers flap only
    # when a heartbeat comes late enough, which a window may or may not catch.)
    out = repl(["config set gossip_interval 10 window=6s", "config show"])
    assert not out[0]["ok"] and out[0]["code"] == "unavailable"
    assert "stopped at A" in out[0]["error"] and "down" in out[0]["error"], out[0]["error"]
    assert out[1]["version"] == 0 and out[1]["agreed"]


def test_a_bad_key_or_value_is_one_clear_error_and_changes_nothing() -> None:
    out = run_lines(
        [
            "config set nope 1",
            "config set phi_threshold high",
            "config set hint_max_age 5000",
            "config set request_timeout",
            "config show",
        ],
        memory=True,
    )
    assert [o["code"] for o in out[:4]] == ["bad_input"] * 4, out
    assert "unknown config key 'nope'" in out[0]["error"]
    assert "takes a number" in out[1]["error"]
    assert "tombstone_grace" in out[2]["error"]
    assert out[4]["version"] == 0 and out[4]["set"] == {}


def test_a_killed_node_stops_the_rollout_before_it_starts() -> None:
    out = run_lines(["kill C", "config set phi_threshold 9", "revive C", "config show"], memory=True)
    assert out[1]["code"] == "unavailable" and "C down" in out[1]["error"]
    assert out[3]["version"] == 0


class OneBadNode:
    """A backend whose node C fails every read once it runs a version above 0: the rollout must
    stop there and put A and B, which took the change healthy, back too."""

    def __init__(self) -> None:
        self.names = ["A", "B", "C", "D"]
        self.config: dict[str, dict[str, Any]] = {n: {"version": 0, "set": {}} for n in self.names}
        self.applied: list[tuple[str, int]] = []
        self.rid = 0

    def now(self) -> float:
        return trio.current_time()

    def is_alive(self, name: str) -> bool:
        return True

    def new_rid(self) -> int:
        self.rid += 1
        return self.rid

    async def node_info(self, name: str, counts: bool = True) -> dict[str, Any]:
        return {"config": {**self.config[name], "values": {}}}

    async def node_members(self, name: str) -> list[dict[str, Any]]:
        return [{"id": n, "up": True, "status": "normal"} for n in self.names]

    async def set_node_config(self, name: str, plain: dict[str, Any]) -> dict[str, Any]:
        self.config[name] = {"version": plain["version"], "set": plain["values"]}
        self.applied.append((name, plain["version"]))
        return self.config[name]

    async def request(self, via: str, request: Any, timeout: float) -> Any:
        from bhandar_cli.core.protocol.client_messages import Failure, GetResult

        await trio.sleep(0.002)
        if via == "C" and self.config["C"]["version"] > 0:
            return Failure("timeout", "too slow")
        return GetResult(via, None, 2, 2)


def test_a_regression_at_a_later_node_puts_the_nodes_before_it_back_too() -> None:
    from bhandar_cli.client.procedures.config_rollout import ConfigRollout

    backend = OneBadNode()

    async def main() -> str:
        with pytest.raises(Unavailable) as stopped:
            await ConfigRollout(backend, "read_repair", "off", window=0.5).run()  # type: ignore[arg-type]
        return str(stopped.value)

    text = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert "stopped at C" in text and "went back too: A, B" in text, text
    assert backend.applied == [("A", 1), ("B", 1), ("C", 1), ("C", 0), ("B", 0), ("A", 0)]
    assert all(c["version"] == 0 for c in backend.config.values())  # D never saw it
