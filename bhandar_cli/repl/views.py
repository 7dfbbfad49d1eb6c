"""Printing REPL replies: JSON as documented, or the table view the command's table entry names.

The renderers themselves live in views_data, views_cluster, views_ops and views_session.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from rich.console import Console, RenderableType
from rich.text import Text

from bhandar_cli.core.model import ClientError
from bhandar_cli.repl.commands import COMMANDS
from bhandar_cli.repl.session import Reply
from bhandar_cli.repl.table import CommandTable
from bhandar_cli.repl.views_data import with_trace


def render(reply: Reply, commands: CommandTable[Any] = COMMANDS) -> RenderableType:
    data = reply.data
    if isinstance(data, ClientError):
        return render_error(data)
    spec = commands.get(reply.cmd)
    if spec is None or spec.renderer is None:
        return Text(f"ok: {reply.cmd}", style="green")
    return spec.renderer(data)


def render_error(err: ClientError, where: str = "") -> RenderableType:
    """The error line, after `where` (a script's "command 2 (put): "), then its trace if any."""
    line = Text.assemble(where, ("error", "bold red"), f" ({err.code}): ", str(err))
    return with_trace(line, err.trace)


def print_reply(console: Console, reply: Reply, output: str, commands: CommandTable[Any] = COMMANDS) -> None:
    if output == "json":
        console.file.write(json_line(reply))
    else:
        console.print(render(reply, commands))
    console.file.flush()


def reply_text(
    reply: Reply,
    output: str,
    to_text: Callable[[RenderableType], str],
    commands: CommandTable[Any] = COMMANDS,
) -> str:
    """The reply as printed: its JSON line, or its view rendered by `to_text` (lines, wrapped)."""
    return json_line(reply) if output == "json" else to_text(render(reply, commands))


def json_line(reply: Reply) -> str:
    return json.dumps(reply.to_json(), ensure_ascii=False, separators=(",", ":")) + "\n"
