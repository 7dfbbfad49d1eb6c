"""Fuzz the REPL's parser (repl/grammar.py over the command table): any line gives commands that
fit their table entries, or a `BadInput` that says what is wrong. Nothing else escapes."""

from __future__ import annotations

import contextlib
import math

from hypothesis import example, given
from hypothesis import strategies as st

from bhandar_cli.core.model.errors import BadInput
from bhandar_cli.repl.commands import COMMANDS
from bhandar_cli.repl.completer import argument_hint
from bhandar_cli.repl.grammar import MAX_DURATION, parse, parse_duration

from .conftest import fuzz_settings
from .repl_lines import lines

any_line = st.text(max_size=120) | st.text(st.sampled_from("put get kv k v=c\"'\\;# |="), max_size=60)


numbers_with_units = st.builds(
    lambda digits, unit: digits + unit,
    st.text("0123456789", min_size=1, max_size=400),
    st.sampled_from(["", "s", "ms", "m", " s", ".5m"]),
)


def check_line(line: str) -> None:
    argument_hint(line)  # the toolbar reads every keystroke
    try:
        parsed = parse(line, COMMANDS)
    except BadInput as exc:
        assert str(exc)
        return
    for command in parsed:
        assert COMMANDS.get(command.name) is command.spec
        assert command.spec.min_args <= len(command.args)
        assert command.spec.max_args is None or len(command.args) <= command.spec.max_args
        assert set(command.options) <= {o.name for o in command.spec.options}
        for i in range(len(command.args)):
            with contextlib.suppress(BadInput):
                command.keyword(i)


@fuzz_settings()
@given(line=any_line)
@example(line='put kv k "unclosed')
@example(line="\\")
def test_arbitrary_lines(line: str) -> None:
    check_line(line)


@fuzz_settings()
@given(line=lines())
def test_grammar_aware_lines(line: str) -> None:
    check_line(line)


@fuzz_settings()
@given(text=st.text(max_size=30) | numbers_with_units)
@example(text="9" * 400).via("float('9' * 400) is infinite: a sleep that never ends")
@example(text="99999999999m")
def test_durations_are_finite_and_bounded_or_refused(text: str) -> None:
    try:
        seconds = parse_duration(text)
    except BadInput as exc:
        assert str(exc)
        return
    assert math.isfinite(seconds) and 0 <= seconds <= MAX_DURATION
