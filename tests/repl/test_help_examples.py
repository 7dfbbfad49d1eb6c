"""Every example `help` shows runs where it is shown: in the default REPL (`bhandar repl`, an
in-process cluster with a web view to serve), each command's examples in order, with no error.

Found by a teacher's trial (issue 41): `help upgrade` offered `upgrade to=2`, which the default
REPL refuses, and `restore before` needed a snapshot no example had taken.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from bhandar_cli.client.openers import ClusterOptions
from bhandar_cli.repl.batch import open_session
from bhandar_cli.repl.commands import COMMANDS
from bhandar_cli.repl.table import CommandSpec
from bhandar_cli.web.background import serve_in_background


def run_examples(examples: tuple[str, ...]) -> list[tuple[str, dict[str, Any]]]:
    """Each example line of one command, in order, in one fresh default REPL: (line, reply) pairs."""

    async def main() -> list[tuple[str, dict[str, Any]]]:
        async with open_session(ClusterOptions(), "json", serve_in_background) as session:
            out: list[tuple[str, dict[str, Any]]] = []
            for line in examples:
                out.extend((line, reply.to_json()) for reply in await session.run_line(line))
            return out

    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


@pytest.mark.parametrize("spec", [s for s in COMMANDS if s.examples], ids=lambda s: s.name)
def test_every_help_example_runs_in_the_default_repl(
    spec: CommandSpec[Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # `snapshot nightly to=backups` writes under the working directory
    replies = run_examples(spec.examples)
    failed = [(line, reply.get("error")) for line, reply in replies if reply.get("ok") is False]
    assert failed == []
    for example in spec.examples:  # each one ran, and ended with this command
        ran = [reply for line, reply in replies if line == example]
        assert ran and ran[-1]["cmd"].split()[0] == spec.name, example
