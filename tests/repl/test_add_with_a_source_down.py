"""`add F` while C is down, through the REPL on an in-process cluster (virtual clock): the join
does not wait for C, its progress names C and the ranges F took over from it, and every write
acknowledged before is readable from F's ranges afterwards. On the code before, the add waited
120 s for C, said nothing, and failed with "F did not finish bootstrapping" without naming C."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio
import trio.testing

from bhandar_cli.client.openers import ClusterOptions
from bhandar_cli.core.membership.ring import key_token
from bhandar_cli.core.model.records import Versioned
from bhandar_cli.repl.batch import open_session
from bhandar_cli.repl.session import Session

KEYS = [f"k{i}" for i in range(80)]
Run = Callable[[str], Awaitable[dict[str, Any]]]


async def written(session: Session, down: tuple[str, ...]) -> Run:
    """Write every key at QUORUM, kill the nodes `down`, and wait (virtual seconds) until every
    node has noticed; the session's command runner, answering each reply as JSON."""

    async def run(line: str) -> dict[str, Any]:
        (reply,) = await session.run_line(line)
        return reply.to_json()

    for key in KEYS:
        assert (await run(f"put kv {key} '\"{key}\"' c=QUORUM"))["ok"]
    for node in down:
        assert (await run(f"kill {node}"))["ok"]
    await trio.sleep(10)  # every node notices
    return run


def test_add_while_a_source_is_down_names_it_and_finishes(capsys: pytest.CaptureFixture[str]) -> None:
    async def main() -> tuple[dict[str, Any], list[str], list[str], dict[str, list[bytes | None]]]:
        async with open_session(ClusterOptions(nodes=5), "json") as session:
            before = session.client.backend.ring
            run = await written(session, ("C",))
            added = await run("add F")
            after = session.client.backend.ring
            taken = [
                k
                for k in KEYS
                if "C" in before.preference_list(key_token("kv", k), 3)
                and "C" not in (prefs := after.preference_list(key_token("kv", k), 3))
                and "F" in prefs
            ]
            gets = [await run(f"get kv {k} c=QUORUM via=F") for k in KEYS]
            values = [str(g.get("values")) for g in gets]
            held = {}
            for k in taken:
                own, _ = await session.client.backend.node_records("F", "kv", k)
                held[k] = [s.value for s in own.siblings] if isinstance(own, Versioned) else []
            return added, values, taken, held

    added, values, taken, held = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert added["ok"], added
    assert taken, "F took no key from C: pick other keys"
    down = added["sources_down"]
    assert isinstance(down, list) and [d["node"] for d in down] == ["C"], down
    assert down[0]["ranges"] > 0 and "C" not in down[0]["from"], down
    progress = capsys.readouterr().err
    assert "add: F does not wait for C (down): the " in progress, progress
    assert "it loses to F come from their other replicas" in progress, progress
    assert values == [str([k]) for k in KEYS]  # every acknowledged write, read through F
    assert held == {k: [f'"{k}"'.encode()] for k in taken}  # on F itself, streamed from C's partners


def test_add_with_two_replicas_of_a_range_down_says_whom_it_waits_for(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """With C and D down, a range F takes over from C whose third replica is D has nothing to
    stream it from but one replica: F waits, and says so, until one of them is back."""

    async def main() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        async with open_session(ClusterOptions(nodes=5), "json") as session:
            run = await written(session, ("C", "D"))
            added = await run("add F")
            assert (await run("revive D"))["ok"]
            await trio.sleep(30)  # F streams D's ranges; C's come from their other replicas
            return added, await run("members from=A"), await run("get kv k1 c=QUORUM via=F")

    added, members, read = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert not added["ok"] and added["code"] == "timeout", added
    error = str(added["error"])
    assert error.startswith("F did not finish bootstrapping in 120 s: F waits for C (down: the "), error
    assert error.endswith("wait for their other replicas D (down) to stream them)"), error
    progress = capsys.readouterr().err
    assert "add: F waits for C (down) until the " in progress, progress
    statuses = {m["id"]: m["status"] for m in members["members"]}
    assert statuses["F"] == "normal", statuses
    assert read["ok"] and read["values"] == ["k1"], read
