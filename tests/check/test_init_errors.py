"""A node that does not answer init is told what the harness saw: nothing at all on its standard
output (an answer never flushed, or without its newline), or lines that were no init_ok answering
the init. Both run at once (one trio loop)."""

from __future__ import annotations

import pytest

from bhandar_cli.check.check_run import CheckOutcome, run_checks
from tests.check.support import py, short

CASES = {"no-flush": py("no_flush.py"), "wrong-reply": py("init_wrong_reply.py")}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CheckOutcome]:
    root = tmp_path_factory.mktemp("init")
    runs = [
        short(argv, "echo", root / name, time_limit=0.3, init_timeout=1.0) for name, argv in CASES.items()
    ]
    return dict(zip(CASES, run_checks(runs), strict=True))


def test_a_node_that_never_flushes_is_asked_whether_it_flushes(outcomes: dict[str, CheckOutcome]) -> None:
    outcome = outcomes["no-flush"]
    assert outcome.exit_code == 2
    assert (
        "n1 did not answer init within 1 s: it wrote nothing on standard output (is it flushing? "
        "each message is one line ending in a newline; Python: print(..., flush=True))"
    ) in outcome.error


def test_a_node_that_answers_something_else_is_told_so(outcomes: dict[str, CheckOutcome]) -> None:
    outcome = outcomes["wrong-reply"]
    assert outcome.exit_code == 2
    assert (
        "n1 did not answer init within 1 s: it wrote 1 line(s), none an init_ok answering init (msg_id "
        in (outcome.error)
    )
    assert "wrote nothing" not in outcome.error
