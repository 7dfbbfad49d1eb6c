"""REPL commands of the session itself: trace, consistency, output, sleep, wait, web, help, quit."""

from __future__ import annotations

from typing import Any

from bhandar_cli.core.model import BadInput, parse_level
from bhandar_cli.repl.grammar import parse_duration
from bhandar_cli.repl.kinds import COMMAND, DURATION, LEVEL, OUTPUT_FORMAT, PORT, keyword
from bhandar_cli.repl.session import Session
from bhandar_cli.repl.table import Arg, Command, CommandTable, Option
from bhandar_cli.repl.views_session import (
    render_consistency,
    render_help,
    render_output,
    render_quit,
    render_sleep,
    render_trace,
    render_wait,
    render_web,
)

TABLE: CommandTable[Session] = CommandTable()
WAIT_TIMEOUT = "30s"


@TABLE.command(
    "trace",
    "show per-replica steps after each data command",
    args=(Arg(keyword("on", "off")),),
    help="""With trace on, each get, put, delete and incr also prints the coordinator's steps with
    their times: which replicas it asked, which answered, hints and read repairs.""",
    examples=("trace on",),
    renderer=render_trace,
)
async def trace(session: Session, cmd: Command) -> dict[str, Any]:
    session.client.data.trace = cmd.keyword(0) == "on"
    return {"cmd": "trace", "ok": True, "trace": session.client.data.trace}


@TABLE.command(
    "consistency",
    "show or set the default level",
    args=(Arg(LEVEL, optional=True),),
    help="""The level of data commands that give no c=: how many of the N replicas must answer
    (one, a majority, or all). With no argument it shows the current one.""",
    examples=("consistency ONE",),
    renderer=render_consistency,
)
async def consistency(session: Session, cmd: Command) -> dict[str, Any]:
    if cmd.args:
        session.client.data.consistency = parse_level(cmd.arg(0))
    return {"cmd": "consistency", "ok": True, "level": session.client.data.consistency}


@TABLE.command(
    "output",
    "switch the output format",
    args=(Arg(OUTPUT_FORMAT),),
    help="""table prints views for people; json prints one JSON object per command, in the shapes
    listed under JSON OUTPUT in bhandar(1).""",
    examples=("output json",),
    renderer=render_output,
)
async def output(session: Session, cmd: Command) -> dict[str, Any]:
    session.output = cmd.keyword(0)
    return {"cmd": "output", "ok": True, "output": session.output}


@TABLE.command(
    "sleep",
    "wait (2s, 500ms, 1m)",
    args=(Arg(DURATION),),
    help="""The cluster keeps running meanwhile: failure detection, hint delivery and anti-entropy
    go on. A bare number is seconds. On a virtual clock the time passes at once.""",
    examples=("sleep 2s",),
    renderer=render_sleep,
)
async def sleep(session: Session, cmd: Command) -> dict[str, Any]:
    return await session.client.admin.sleep(parse_duration(cmd.arg(0)))


@TABLE.command(
    "wait",
    "wait until hints are delivered and live replicas agree",
    args=(Arg(keyword("converged")),),
    options=(Option("timeout", DURATION.offering("5s", "10s", "30s")),),
    help=f"""Waits until no node is joining or leaving, no hint is pending for a live node and live
    replicas agree, and fails with the reason at its timeout (default {WAIT_TIMEOUT}).""",
    examples=("wait converged timeout=10s",),
    renderer=render_wait,
)
async def wait(session: Session, cmd: Command) -> dict[str, Any]:
    cmd.keyword(0)
    timeout = parse_duration(cmd.options.get("timeout", WAIT_TIMEOUT))
    return await session.client.admin.wait_converged(timeout)


@TABLE.command(
    "web",
    "serve a live web view of this cluster",
    options=(Option("port", PORT),),
    help="""Serves a page on 127.0.0.1 (default port 8700; port=0 picks a free one) that shows, live,
    the nodes with their state and phi, partition groups, the ring, the last requests as message
    sequence diagrams (with trace on), a key's siblings and latency histograms; its buttons and
    command box run commands in this session, echoed here. It serves until the session ends.""",
    examples=("web port=0",),
    renderer=render_web,
)
async def web(session: Session, cmd: Command) -> dict[str, Any]:
    text = cmd.options.get("port", "8700")
    if not text.isdigit() or int(text) > 65535:
        raise BadInput(f"port must be 0 to 65535 (got {text!r})")
    if session.serve_web is None:
        raise BadInput("this session has no web view to serve (bhandar repl and bhandar web have one)")
    return await session.serve_web(session, int(text))


@TABLE.command(
    "help",
    "list commands, or explain one",
    args=(Arg(COMMAND, optional=True),),
    aliases=("?",),
    help="With no argument, every command; with a command's name or alias, its usage, help and examples.",
    examples=("help put",),
    renderer=render_help,
)
async def help_(session: Session, cmd: Command) -> dict[str, Any]:
    commands = session.commands
    if not cmd.args:
        listed = [{"name": s.name, "usage": s.usage, "summary": s.summary} for s in commands]
        return {"cmd": "help", "ok": True, "commands": listed}
    topic = cmd.arg(0)
    spec = commands.get(topic)
    if spec is None:
        raise BadInput(f"no command {topic!r}{commands.suggest(topic)}")
    return {
        "cmd": "help",
        "ok": True,
        "name": spec.name,
        "usage": spec.usage,
        "summary": spec.summary,
        "help": spec.help,
        "aliases": list(spec.aliases),
        "examples": list(spec.examples),
    }


@TABLE.command(
    "quit",
    "leave the REPL",
    aliases=("exit",),
    help=(
        "Ctrl-D at the prompt does the same. An in-process cluster stops cleanly with the REPL; a"
        " process cluster (repl --connect) keeps running: stop it with `bhandar cluster down`."
    ),
    renderer=render_quit,
)
async def quit_(session: Session, cmd: Command) -> dict[str, Any]:
    session.quit = True
    return {"cmd": "quit", "ok": True}
