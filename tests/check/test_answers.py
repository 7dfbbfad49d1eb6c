"""Every answer a node sends its clients is accounted: an answer that matches no request (a wrong
in_reply_to, or none) makes the verdict invalid, quoting it; late answers and answers that are all
errors are told apart from silence, with their counts, in the verdict, the text report and the JSON.
Also Maelstrom's net statistics (messages per operation) and its `--availability` (a share of the
operations, or all of them, must succeed), and the hint a verdict of lost elements gets about
--recovery. All runs at once (one trio loop)."""

from __future__ import annotations

import pytest

from bhandar_cli.check.check_report import render, to_json
from bhandar_cli.check.check_run import CheckOutcome, run_checks
from bhandar_cli.check.html import page
from bhandar_cli.check.maelstrom_history import (
    INVALID,
    VALID,
    MaelstromHistory,
    Problem,
    Verdict,
    with_availability,
    with_recovery_hint,
)
from tests.check.support import py, short

MODES = ("wrong-reply", "no-reply-to", "late", "errors")


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CheckOutcome]:
    root = tmp_path_factory.mktemp("answers")
    runs = [short(py("echo_answers.py", MODE=mode), "echo", root / mode) for mode in MODES]
    runs.append(short(py("echo.py"), "echo", root / "correct", availability=1.0))
    runs.append(short(py("echo_answers.py", MODE="errors"), "echo", root / "required", availability=0.5))
    runs.append(short(py("sets.py", MODE="local"), "g-set", root / "unspread"))
    return dict(zip((*MODES, "correct", "required", "unspread"), run_checks(runs), strict=True))


def test_a_wrong_in_reply_to_is_invalid_and_quoted(outcomes: dict[str, CheckOutcome]) -> None:
    outcome = outcomes["wrong-reply"]
    assert outcome.verdict is not None and outcome.verdict.status == "invalid"
    assert outcome.exit_code == 1
    summary = outcome.verdict.summary
    assert "answers that match no request of their client" in summary
    assert "whose in_reply_to is no msg_id that client sent and awaits" in summary
    assert '"in_reply_to": ' in summary  # the raw message, quoted
    unmatched = sum(a.unmatched for a in outcome.answers.values())
    assert unmatched >= 3 and [p.kind for p in outcome.verdict.problems].count("unmatched") >= 1


def test_an_answer_without_in_reply_to_is_invalid(outcomes: dict[str, CheckOutcome]) -> None:
    outcome = outcomes["no-reply-to"]
    assert outcome.verdict is not None and outcome.verdict.status == "invalid"
    assert "without in_reply_to" in outcome.verdict.summary
    assert all(a.unmatched == a.without_reply_to > 0 for a in outcome.answers.values())


def test_late_answers_are_counted_and_named_not_called_silence(outcomes: dict[str, CheckOutcome]) -> None:
    outcome = outcomes["late"]
    assert outcome.verdict is not None and outcome.verdict.status == "unknown"
    assert "answers came after their request had timed out" in outcome.verdict.summary
    assert "no answer came" not in outcome.verdict.summary
    assert sum(a.late for a in outcome.answers.values()) >= 3
    assert all(a.unmatched == 0 for a in outcome.answers.values())


def test_answers_that_are_all_errors_say_which_errors(outcomes: dict[str, CheckOutcome]) -> None:
    outcome = outcomes["errors"]
    assert outcome.verdict is not None and outcome.verdict.status == "unknown"
    n1 = outcome.answers["n1"]
    assert n1.matched == sum(n1.errors.values()) > 0
    assert f"n1 answered none of its {n1.matched} requests with *_ok: {n1.matched} errors" in (
        outcome.verdict.summary
    )
    assert f"11 temporarily-unavailable x {n1.matched}: 'not leader'" in outcome.verdict.summary
    text = render(outcome)
    assert f"  n1: {n1.matched} matched; errors 11 temporarily-unavailable x {n1.matched}" in text
    plain = to_json(outcome)["answers"]["n1"]
    assert plain["errors"] == [
        {"code": 11, "name": "temporarily-unavailable", "text": "not leader", "count": n1.matched}
    ]


def test_a_correct_node_has_every_answer_matched(outcomes: dict[str, CheckOutcome]) -> None:
    outcome = outcomes["correct"]
    assert outcome.verdict is not None and outcome.verdict.valid
    asked = len(outcome.history.ops)
    assert sum(a.matched for a in outcome.answers.values()) == asked
    out = to_json(outcome)
    assert {n: (a["unmatched"], a["late"]) for n, a in out["answers"].items()} == {
        node: (0, 0) for node in outcome.nodes
    }
    assert f"answers: {asked} matched (0 of them errors), 0 late" in render(outcome)


def test_the_unmatched_answers_are_in_the_json(outcomes: dict[str, CheckOutcome]) -> None:
    out = to_json(outcomes["wrong-reply"])
    samples = [s for a in out["answers"].values() for s in a["unmatched_samples"]]
    assert samples and all(s.startswith('{"src": "n') for s in samples)
    assert any(p["kind"] == "unmatched" for p in out["problems"])


def test_availability_total_passes_when_every_operation_succeeds(outcomes: dict[str, CheckOutcome]) -> None:
    outcome = outcomes["correct"]
    assert outcome.verdict is not None and outcome.verdict.valid
    assert outcome.verdict.stats["ok_fraction"] == 1.0
    assert "--availability total" in to_json(outcome)["repeat"]


def test_availability_below_the_fraction_is_invalid_with_the_counts(
    outcomes: dict[str, CheckOutcome],
) -> None:
    outcome = outcomes["required"]
    assert outcome.verdict is not None and outcome.verdict.status == "invalid"
    ops = len(outcome.history.ops)
    assert f"Only 0 of {ops} operations (0.0%) succeeded; --availability 0.5 asks for at least 50.0%." in (
        outcome.verdict.summary
    )
    assert outcome.verdict.problems[0].kind == "availability"


def test_availability_total_fails_on_one_failed_operation() -> None:
    history = MaelstromHistory()
    for i in range(4):
        op = history.invoke(0.0, "c1", "n0", "echo", i)
        if i:
            op.answer(0.1, i)
        else:
            op.failed(0.1, 11, "busy")
    verdict = Verdict(VALID, "All fine.", (), {})
    total = with_availability(verdict, history, 1.0)
    assert total.status == "invalid" and total.stats["ok_fraction"] == 0.75
    assert total.summary.startswith(
        "Only 3 of 4 operations (75.0%) succeeded; --availability total asks for every one."
    )
    assert with_availability(verdict, history, 0.75).valid
    assert with_availability(verdict, history, None).valid


def test_net_stats_of_echo_count_two_client_messages_an_operation_and_none_between_servers(
    outcomes: dict[str, CheckOutcome],
) -> None:
    outcome = outcomes["correct"]
    ops = len(outcome.history.ops)
    net = to_json(outcome)["net"]
    assert net["servers"] == {"send_count": 0, "recv_count": 0, "msg_count": 0, "msgs_per_op": 0.0}
    assert net["clients"] == {
        "send_count": 2 * ops,
        "recv_count": 2 * ops,
        "msg_count": 2 * ops,
        "msgs_per_op": 2.0,
    }
    assert net["all"]["msg_count"] == 2 * ops
    assert f"net: servers 0 msgs (0 per op), clients {2 * ops} msgs (2 per op)" in render(outcome)


def test_lost_elements_get_a_hint_naming_the_recovery_option(outcomes: dict[str, CheckOutcome]) -> None:
    outcome = outcomes["unspread"]
    assert outcome.verdict is not None and outcome.verdict.status == "invalid"
    assert any(p.kind == "lost" for p in outcome.verdict.problems)
    hint = "The final reads came 0.3 s after the heal (--recovery 0.3s); a node that replicates more slowly"
    assert f"Hint: {hint}" in outcome.verdict.summary
    assert to_json(outcome)["hints"][0].startswith(hint)


def test_only_problems_a_slow_node_also_shows_get_the_hint() -> None:
    wrong = Verdict(
        INVALID, "n1 echoed the wrong thing.", (Problem("wrong-echo", "n1 echoed the wrong thing."),)
    )
    assert with_recovery_hint(wrong, 1.0) == wrong
    off = Verdict(INVALID, "n2 read 3.", (Problem("wrong-sum", "n2 read 3."),))
    hinted = with_recovery_hint(off, 2.0)
    assert hinted.summary.startswith(
        "n2 read 3. Hint: The final reads came 2 s after the heal (--recovery 2s)"
    )
    assert len(hinted.hints) == 1


def test_the_html_report_has_the_hint_and_the_net_statistics(outcomes: dict[str, CheckOutcome]) -> None:
    hinted = page(outcomes["unspread"])
    assert '<p class="hint">Hint: The final reads came 0.3 s after the heal' in hinted
    ops = len(outcomes["correct"].history.ops)
    net = page(outcomes["correct"])
    assert "<h2>Messages</h2>" in net
    assert "<tr><td>servers</td><td>0</td><td>0</td><td>0</td><td>0</td></tr>" in net
    assert f"<tr><td>clients</td><td>{2 * ops}</td><td>{2 * ops}</td><td>{2 * ops}</td><td>2</td></tr>" in net
