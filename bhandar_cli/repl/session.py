"""A REPL session: runs parsed commands through `client.Client` and keeps the session settings.

Every command yields one `Reply` (ok or not); nothing a person types can raise out of here, so a
bad command costs one line of error and the session goes on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import trio

from bhandar_cli.client import Client
from bhandar_cli.core.errors import BadInput, BhandarError
from bhandar_cli.outcomes import ClientError
from bhandar_cli.repl.grammar import (
    ALIASES,
    COMMANDS,
    Command,
    Word,
    parse,
    parse_duration,
    partition_groups,
    suggest,
)
from bhandar_cli.values import parse_value_text


@dataclass
class Reply:
    cmd: str
    ok: bool
    data: Any  # an outcome, a dict in the DESIGN.md shape, or a ClientError

    def to_json(self) -> dict[str, Any]:
        if isinstance(self.data, ClientError):
            return self.data.to_json(self.cmd)
        if hasattr(self.data, "to_json"):
            return self.data.to_json()  # type: ignore[no-any-return]
        return dict(self.data)


class Session:
    def __init__(self, client: Client, output: str = "table") -> None:
        self.client = client
        self.output = output
        self.quit = False

    async def run_line(self, line: str) -> list[Reply]:
        try:
            commands = parse(line)
        except BhandarError as exc:
            return [Reply(_first_word(line), False, _as_client_error(exc))]
        replies = []
        for command in commands:
            replies.append(await self.execute(command))
            if self.quit:
                break
        return replies

    async def execute(self, cmd: Command) -> Reply:
        try:
            data = await self._dispatch(cmd)
        except trio.Cancelled:
            raise
        except BhandarError as exc:
            return Reply(cmd.name, False, _as_client_error(exc))
        except Exception as exc:  # a bug of ours: say so, keep the session alive
            return Reply(
                cmd.name, False, ClientError("internal", f"internal error ({type(exc).__name__}: {exc})")
            )
        return Reply(cmd.name, True, data)

    async def _dispatch(self, cmd: Command) -> Any:
        c = self.client
        opts = cmd.options
        name = cmd.name
        if name == "put":
            value, ctype = parse_value_text(_value_text(cmd.args[2]))
            return await c.put(
                cmd.arg(0), cmd.arg(1), value, ctype, opts.get("ctx"), opts.get("c"), opts.get("via")
            )
        if name == "get":
            return await c.get(cmd.arg(0), cmd.arg(1), opts.get("c"), opts.get("via"))
        if name == "delete":
            return await c.delete(cmd.arg(0), cmd.arg(1), opts.get("ctx"), opts.get("c"), opts.get("via"))
        if name == "incr":
            delta = _int(cmd.arg(2), "DELTA") if len(cmd.args) > 2 else 1
            return await c.incr(cmd.arg(0), cmd.arg(1), delta, opts.get("id"), opts.get("c"), opts.get("via"))
        if name == "keyspace":
            return await self._keyspace(cmd)
        if name in ("status", "ring", "hints", "metrics"):
            self._no_args(cmd)
            return await getattr(c, name)()
        if name in ("prefs", "clock"):
            return await getattr(c, name)(cmd.arg(0), cmd.arg(1))
        if name == "upgrade":
            self._no_args(cmd)
            return await c.upgrade()
        if name == "members":
            return await c.members(opts.get("from"))
        if name == "merkle":
            return await c.merkle(cmd.arg(0), cmd.arg(1))
        if name in ("repair", "flush", "compact"):
            return await getattr(c, name)(cmd.arg(0) if cmd.args else None)
        if name in ("snapshot", "restore", "decommission"):
            return await getattr(c, name)(cmd.arg(0))
        if name == "add":
            return await c.add(cmd.arg(0), opts.get("zone"))
        if name == "partition":
            return await c.partition(partition_groups(cmd.args))
        if name == "heal":
            return await c.heal()
        if name in ("kill", "revive"):
            return await getattr(c, name)(cmd.arg(0))
        if name == "delay":
            return await c.delay(cmd.arg(0), _float(cmd.arg(1), "MS"))
        if name == "sleep":
            return await c.sleep(parse_duration(cmd.arg(0)))
        if name == "wait":
            if cmd.arg(0).lower() != "converged":
                raise BadInput("usage: wait converged [timeout=DURATION]")
            return await c.wait_converged(parse_duration(opts.get("timeout", "30s")))
        return self._setting(cmd)

    def _setting(self, cmd: Command) -> dict[str, Any]:
        c = self.client
        name = cmd.name
        if name == "trace":
            state = cmd.arg(0).lower()
            if state not in ("on", "off"):
                raise BadInput("usage: trace on|off")
            c.trace = state == "on"
            return {"cmd": "trace", "ok": True, "trace": c.trace}
        if name == "consistency":
            if cmd.args:
                from bhandar_cli.core.config import parse_level

                c.consistency = parse_level(cmd.arg(0))
            return {"cmd": "consistency", "ok": True, "level": c.consistency}
        if name == "output":
            fmt = cmd.arg(0).lower()
            if fmt not in ("table", "json"):
                raise BadInput("usage: output table|json")
            self.output = fmt
            return {"cmd": "output", "ok": True, "output": fmt}
        if name == "help":
            return self._help(cmd.arg(0) if cmd.args else None)
        if name == "quit":
            self.quit = True
            return {"cmd": "quit", "ok": True}
        raise ClientError("internal", f"command {name} has no handler")

    async def _keyspace(self, cmd: Command) -> dict[str, Any]:
        sub = cmd.arg(0).lower()
        if sub == "list":
            return await self.client.keyspace_list()
        if sub != "create" or len(cmd.args) != 2:
            raise BadInput(f"usage: {COMMANDS['keyspace'].usage}")
        n = cmd.options.get("n")
        return await self.client.keyspace_create(
            cmd.arg(1),
            cmd.options.get("policy", "siblings"),
            None if n is None else _int(n, "n"),
            cmd.options.get("quorum", "sloppy"),
        )

    def _help(self, topic: str | None) -> dict[str, Any]:
        if topic is None:
            return {
                "cmd": "help",
                "ok": True,
                "commands": [
                    {"name": s.name, "usage": s.usage, "summary": s.summary} for s in COMMANDS.values()
                ],
            }
        name = ALIASES.get(topic.lower(), topic.lower())
        spec = COMMANDS.get(name)
        if spec is None:
            raise BadInput(f"no command {topic!r}{suggest(topic)}")
        return {
            "cmd": "help",
            "ok": True,
            "name": spec.name,
            "usage": spec.usage,
            "summary": spec.summary,
            "examples": list(spec.examples),
        }

    @staticmethod
    def _no_args(cmd: Command) -> None:
        if cmd.args:
            raise BadInput(f"usage: {COMMANDS[cmd.name].usage}")


def _value_text(word: Word) -> str:
    """The raw word when it is JSON as typed (unquoted [\"a\"]), else the unquoted text."""
    try:
        json.loads(word.raw)
    except ValueError:
        return word.text
    return word.raw


def _int(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise BadInput(f"{what} must be an integer (got {text!r})") from None


def _float(text: str, what: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise BadInput(f"{what} must be a number (got {text!r})") from None


def _first_word(line: str) -> str:
    words = line.split()
    return words[0].lower() if words else ""


def _as_client_error(exc: BhandarError) -> ClientError:
    if isinstance(exc, ClientError):
        return exc
    return ClientError(exc.code, str(exc))
