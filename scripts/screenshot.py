"""Record a REPL session as an SVG screenshot (rich's Console.save_svg) for the docs.

    python scripts/screenshot.py            # writes docs/repl-siblings.svg

It runs the seed's cart:42 story on a 3-node in-process cluster on a virtual clock, echoing each
command after a prompt as a person would type it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import trio
import trio.testing
from rich.console import Console
from rich.text import Text

from bhandar_cli.client.openers import ClusterOptions
from bhandar_cli.repl.batch import open_session
from bhandar_cli.repl.views import render

LINES = [
    "keyspace create carts",
    "put carts cart:42 '[\"rice\"]'",
    "get carts cart:42",
    "partition A | B C",
    "sleep 4s",
    'put carts cart:42 \'["rice","oil"]\' via=A c=ONE',
    'put carts cart:42 \'["rice","salt"]\' via=B',
    "heal",
    "sleep 4s",
    "get carts cart:42 c=ALL",
    'put carts cart:42 \'["oil","rice","salt"]\'',
    "clock carts cart:42",
]


def main(target: str = "docs/repl-siblings.svg") -> None:
    console = Console(record=True, width=110, force_terminal=True, file=open("/dev/null", "w"))  # noqa: SIM115

    async def run() -> None:
        async with open_session(ClusterOptions(nodes=3, memory=True)) as session:
            for line in LINES:
                console.print(Text.assemble(("bhandar", "bold"), "> ", (line, "bright_cyan")))
                for reply in await session.run_line(line):
                    console.print(render(reply))

    trio.run(run, clock=trio.testing.MockClock(autojump_threshold=0))
    Path(target).parent.mkdir(parents=True, exist_ok=True)
    console.save_svg(target, title="bhandar — siblings after a partition")
    print(f"wrote {target}")


if __name__ == "__main__":
    main(*sys.argv[1:])
