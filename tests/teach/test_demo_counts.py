"""What a demo says it counted is what the cluster shows: at each step of all eight demos, the
numbers the narration states (copies, keys, hints) are compared with what `status` and `hints`
answer at that moment, and every ✓ is shown beside the reply it was checked against (issue 41,
items 5 and 6: the join demo said 26 copies "moved" while the old replicas still held theirs, and
the handoff demo folded away the `hints` table its ✓ was about).

Everything runs on trio's MockClock: the demos' sleeps and waits take no real time.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
import trio
import trio.testing
from rich.console import Console

from bhandar_cli.client.exit_status import EXIT_FAILED, EXIT_OK
from bhandar_cli.client.openers import ClusterOptions
from bhandar_cli.repl.batch import open_session
from bhandar_cli.teach.demo_kit import Demo, DemoContext, Expect, Step
from bhandar_cli.teach.demo_runner import folded, play_step, run_demo
from bhandar_cli.teach.demos import DEMOS
from bhandar_cli.teach.demos_failures import HANDOFF
from bhandar_cli.teach.demos_membership import JOIN
from bhandar_cli.teach.narration import Narration

Json = dict[str, Any]
Claim = Callable[[re.Match[str], Json, Json], str | None]  # None when the cluster agrees


def _copies(status: Json) -> dict[str, int]:
    return {n["id"]: n["keys"] for n in status["nodes"] if n["up"]}


def _total(match: re.Match[str], status: Json, hints: Json) -> str | None:
    said, shown = int(match["copies"]), sum(_copies(status).values())
    return None if said == shown else f"says {said} copies, status counts {shown}"


def _held_by(match: re.Match[str], status: Json, hints: Json) -> str | None:
    said, shown = int(match["keys"]), _copies(status).get(match["node"])
    return None if said == shown else f"says {match['node']} holds {said}, status shows {shown}"


def _moved(match: re.Match[str], status: Json, hints: Json) -> str | None:
    # "k of the n copies moved to X": the old copies are gone (the total is n) and X holds k.
    return _total(match, status, hints) or _held_by(match, status, hints)


def _pending(match: re.Match[str], status: Json, hints: Json) -> str | None:
    said = 0 if match["count"] == "No" else int(match["count"])
    return None if said == hints["pending"] else f"says {said} hints pending, hints counts {hints['pending']}"


def _queue(match: re.Match[str], status: Json, hints: Json) -> str | None:
    counts = {(q["holder"], q["target"]): q["count"] for q in hints["queues"]}
    shown = counts.get((match["node"], match["target"]), 0)
    said = int(match["count"])
    return (
        None if said == shown else f"says {match['node']} holds {said} for {match['target']}, hints: {shown}"
    )


# Every way a narration states a count of the cluster's state, and how to check it.
CLAIMS: tuple[tuple[re.Pattern[str], Claim], ...] = (
    (re.compile(r"status counts (?P<copies>\d+) copies"), _total),
    (re.compile(r"\b(?P<node>[A-Z]) holds copies of (?P<keys>\d+) keys"), _held_by),
    (
        re.compile(r"(?P<keys>\d+) of the (?P<copies>\d+) copies \(\d+%\) moved to (?P<node>[A-Z])\b"),
        _moved,
    ),
    (re.compile(r"\b(?P<count>\d+|No) hints? pending"), _pending),
    (re.compile(r"\b(?P<node>[A-Z]) holds (?P<count>\d+) hints? for (?P<target>[A-Z])\b"), _queue),
)


@dataclass
class Played:
    failure: str | None = None
    claims: list[str] = field(default_factory=list)  # each claim checked, as "step: text"
    wrong: list[str] = field(default_factory=list)
    hidden_evidence: list[str] = field(default_factory=list)
    out: str = ""


async def _play_counting(demo: Demo, verbose: bool = False) -> Played:
    played = Played()
    buffer = io.StringIO()
    out = Console(file=buffer, width=120)
    async with open_session(demo.options) as session:
        ctx = DemoContext()
        said = Narration(demo.name, demo.title, demo.summary, len(demo.steps))
        for number, step in enumerate(demo.steps, 1):
            ctx.read.clear()
            label = f"{number}/{len(demo.steps)}"
            played.failure = await play_step(step, label, session, ctx, out, verbose, said)
            if played.failure is not None:
                break
            # The cluster at this moment, through the same views the REPL and the page use.
            (status,) = [r.to_json() for r in await session.run_line("status")]
            (hints,) = [r.to_json() for r in await session.run_line("hints")]
            words = " ".join([said.view["say"], said.view["then"], *(c["text"] for c in said.view["checks"])])
            for pattern, claim in CLAIMS:
                for match in pattern.finditer(words):
                    played.claims.append(f"step {label}: {match[0]}")
                    wrong = claim(match, status, hints)
                    if wrong is not None:
                        played.wrong.append(f"step {label}: {match[0]!r} {wrong}")
            played.hidden_evidence += [
                f"step {label}: `{ctx.history[i][0]}`" for i in sorted(ctx.read - ctx.shown)
            ]
    played.out = buffer.getvalue()
    return played


def play_counting(demo: Demo, verbose: bool = False) -> Played:
    return trio.run(_play_counting, demo, verbose, clock=trio.testing.MockClock(autojump_threshold=0))


@pytest.mark.parametrize("name", list(DEMOS))
def test_every_count_a_demo_states_is_what_status_shows_then(name: str) -> None:
    played = play_counting(DEMOS[name])
    assert played.failure is None, played.out
    assert played.wrong == [], played.out


@pytest.mark.parametrize(("name", "least"), [("join", 4), ("handoff", 5)])
def test_the_demos_about_counts_state_counts_that_are_checked(name: str, least: int) -> None:
    # The test above must not pass because nothing was said: these demos narrate counts.
    assert len(play_counting(DEMOS[name]).claims) >= least


@pytest.mark.parametrize("name", list(DEMOS))
def test_every_check_is_shown_beside_its_evidence(name: str) -> None:
    played = play_counting(DEMOS[name])
    assert played.failure is None, played.out
    assert played.hidden_evidence == [], played.out


def _steps(out: str) -> list[str]:
    return re.split(r"── step \d+/\d+ ", out)[1:]


def test_handoff_shows_the_hints_table_its_check_is_about() -> None:
    out = io.StringIO()
    assert run_demo(HANDOFF, auto=True, virtual_time=True, stdout=out, stderr=io.StringIO()) == EXIT_OK
    step5 = _steps(out.getvalue())[4]
    assert "bhandar> hints" in step5 and "not shown" not in step5
    table = step5[step5.index("bhandar> hints") : step5.index("✓ fallbacks hold hints")]
    rows = re.findall(r"^ ([A-Z]) +([A-Z]) +(\d+) ", table, re.M)
    assert {target for _, target, _ in rows} == set(_stood_in_for(step5))
    # and the count under the ✓ is the table's
    pending = re.search(r"(\d+) hints pending", step5)
    assert pending is not None and int(pending[1]) == sum(int(c) for _, _, c in rows)


def _stood_in_for(step: str) -> list[str]:
    """The two home replicas the step killed: the one killed here and the one from step 2."""
    return re.findall(r"stands in for ([A-Z])", step)


def test_the_join_demo_says_copied_until_the_old_replicas_drop_their_copies() -> None:
    played = play_counting(JOIN)
    assert played.failure is None, played.out
    step3, step4 = (" ".join(step.split()) for step in _steps(played.out)[2:4])
    assert "copied, not moved yet" in step3 and "moved to E" not in step3
    assert re.search(r"status counts (\d+) copies of 30 keys, where N = 3 needs 90", step3)
    assert re.search(r"✓ A to D dropped the copies E took over: 90 copies in all \(after \d+\.\d s", step4)
    assert re.search(r"\d+ of the 90 copies \(\d+%\) moved to E", step4)


def test_the_fold_keeps_every_command_but_a_long_run_of_one_in_sight() -> None:
    puts = [f"put kv k{i} {i}" for i in range(30)]
    assert folded(puts) == {29: 27}
    assert folded(puts, verbose=True) == {}
    assert folded(["kill D", "sleep 4s", "put carts cart:7 x", "sleep 1s", "hints"]) == {}
    assert folded(["status", *puts[:5], "hints"]) == {5: 2}


def _tiny(step: Step) -> Demo:
    return Demo("tiny", "A tiny demo", "for tests", "nowhere", ClusterOptions(nodes=3), (step,))


def test_a_wait_that_never_comes_true_fails_the_demo_at_its_deadline() -> None:
    never = Expect(
        "a fourth node appears", lambda ctx: f"status shows {len(ctx.reply('status')['nodes'])} nodes"
    )
    out, err = io.StringIO(), io.StringIO()
    demo = _tiny(Step("Wait for nothing.", ["status"], until=never, within=5.0))
    assert run_demo(demo, auto=True, virtual_time=True, stdout=out, stderr=err) == EXIT_FAILED
    assert "waiting until a fourth node appears (at most 5 s)…" in out.getvalue()
    assert "expected a fourth node appears within 5 s, but status shows 3 nodes" in err.getvalue()
    assert out.getvalue().count("bhandar> status") == 1  # the last round only


def test_a_wait_shows_its_last_round_and_how_long_it_took() -> None:
    def after_three_seconds(ctx: DemoContext) -> str | None:
        sleeps = [r for _, r in ctx.history if r.get("cmd") == "sleep"]
        return None if len(sleeps) >= 1 and ctx.reply("status")["ok"] else "not yet"

    demo = _tiny(Step("Wait.", ["sleep 3s", "status"], until=Expect("status answers", after_three_seconds)))
    out = io.StringIO()
    assert run_demo(replace(demo), auto=True, virtual_time=True, stdout=out, stderr=io.StringIO()) == EXIT_OK
    assert re.search(r"✓ status answers \(after 3\.\d s of waiting\)", out.getvalue())
