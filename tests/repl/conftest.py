"""Run REPL command lines against a real in-process trio cluster on a virtual clock."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from bhandar_cli.client.openers import ClusterOptions
from bhandar_cli.repl.batch import open_session


def run_lines(lines: list[str], **options: Any) -> list[dict[str, Any]]:
    """Every reply as its JSON object (the documented shape), in order."""

    async def main() -> list[dict[str, Any]]:
        async with open_session(ClusterOptions(**options), "json") as session:
            out: list[dict[str, Any]] = []
            for line in lines:
                out.extend(reply.to_json() for reply in await session.run_line(line))
            return out

    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


@pytest.fixture
def repl() -> Any:
    return run_lines
