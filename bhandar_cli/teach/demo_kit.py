"""The kit the classroom demos are written with: steps, expectations, the context a step reads,
and the small checks the demos share (`demos.py` has the registry; the scripts are in
`demos_versions.py` and `demos_failures.py`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bhandar_cli.client import ClusterOptions

Json = dict[str, Any]


class DemoError(Exception):
    """A step could not be computed or checked from what the cluster answered."""


@dataclass
class DemoContext:
    """Every command run so far in this demo, with its reply as JSON; the current step's are last."""

    history: list[tuple[str, Json]] = field(default_factory=list)
    step_start: int = 0
    # The positions in `history` of the replies a check looked up by name (`reply`, `last`): the
    # evidence of its ✓, which the runner must not fold out of sight.
    read: set[int] = field(default_factory=set)
    shown: set[int] = field(default_factory=set)  # the positions of the replies shown in full

    @property
    def step(self) -> list[Json]:
        """The replies of the current step, in order."""
        return [reply for _, reply in self.history[self.step_start :]]

    def reply(self, cmd: str, index: int = -1) -> Json:
        """The current step's replies to `cmd` (a command name such as "get"), by position."""
        found = [i for i in range(self.step_start, len(self.history)) if self.history[i][1].get("cmd") == cmd]
        try:
            at = found[index]
        except IndexError:
            raise DemoError(f"this step has no {cmd} reply number {index}") from None
        self.read.add(at)
        return self.history[at][1]

    def last(self, cmd: str) -> Json:
        """The most recent reply to `cmd` anywhere in the demo so far."""
        for at in range(len(self.history) - 1, -1, -1):
            if self.history[at][1].get("cmd") == cmd:
                self.read.add(at)
                return self.history[at][1]
        raise DemoError(f"no {cmd} reply yet")

    def last_two(self, cmd: str) -> tuple[Json, Json]:
        """The two most recent replies to `cmd`, older first."""
        found = [i for i, (_, reply) in enumerate(self.history) if reply.get("cmd") == cmd]
        if len(found) < 2:
            raise DemoError(f"fewer than two {cmd} replies yet")
        self.read.update(found[-2:])
        return self.history[found[-2]][1], self.history[found[-1]][1]

    def replicas(self) -> list[str]:
        """The home replicas of the last `prefs` reply (the preference list)."""
        prefs = self.last("prefs")
        if not prefs.get("ok", True) or "replicas" not in prefs:
            raise DemoError(f"prefs failed: {prefs.get('error', prefs)}")
        return list(prefs["replicas"])

    def fallbacks(self) -> list[str]:
        self.replicas()  # the same check that prefs answered
        return list(self.last("prefs")["fallbacks"])


Text = str | Callable[[DemoContext], str]
Lines = Sequence[str] | Callable[[DemoContext], Sequence[str]]
Check = Callable[[DemoContext], str | None]  # None when met, else what happened instead


@dataclass(frozen=True)
class Expect:
    """What to look for, said as a sentence, and the check that it really happened."""

    what: str
    check: Check


@dataclass(frozen=True)
class Step:
    say: Text  # narration before the commands: what we do and what to look for
    run: Lines
    expect: tuple[Expect, ...] = ()
    then: Text | None = None  # said after the replies, once every expectation held
    # The lesson of some steps is the error itself (ALL with a replica down); in every other step
    # a failed command means the demo is broken, and the runner says so.
    failures_expected: bool = False
    # A step that waits for something the cluster does in its own time (old replicas drop the
    # copies they handed to a joining node): the runner runs its commands again every `poll`
    # seconds of cluster time until `until` holds, and fails the demo if it still does not after
    # `within` seconds. It shows the last round only, with how long it waited.
    until: Expect | None = None
    within: float = 60.0
    poll: float = 1.0


@dataclass(frozen=True)
class Demo:
    name: str
    title: str
    summary: str
    guide: str  # the page of docs/ that explains what the demo shows
    options: ClusterOptions
    steps: tuple[Step, ...]


def text(value: Text, ctx: DemoContext) -> str:
    return value(ctx) if callable(value) else value


def lines(value: Lines, ctx: DemoContext) -> list[str]:
    return list(value(ctx) if callable(value) else value)


# --- small checks, shared by the demos ------------------------------------------------------------


def show(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)


def _same_values(got: list[Any], want: list[Any]) -> bool:
    return sorted(map(show, got)) == sorted(map(show, want))


def get_values(want: list[Any], index: int = -1) -> Check:
    """The step's get (by position) found exactly these values, as siblings, in any order."""

    def check(ctx: DemoContext) -> str | None:
        get = ctx.reply("get", index)
        if not get.get("ok"):
            return f"the get failed: {get.get('error')}"
        if not _same_values(get["values"], want):
            return f"the get returned {show(get['values'])}"
        return None

    return check


def ok_with(cmd: str, index: int = -1, **fields: Any) -> Check:
    """The step's `cmd` reply succeeded and has these field values."""

    def check(ctx: DemoContext) -> str | None:
        reply = ctx.reply(cmd, index)
        if not reply.get("ok"):
            return f"{cmd} failed: {reply.get('error')}"
        wrong = {k: reply.get(k) for k, v in fields.items() if reply.get(k) != v}
        return f"{cmd} answered {wrong}" if wrong else None

    return check


def failed_saying(cmd: str, *phrases: str, index: int = -1) -> Check:
    """The step's `cmd` reply failed, and its sentence contains every phrase."""

    def check(ctx: DemoContext) -> str | None:
        reply = ctx.reply(cmd, index)
        if reply.get("ok"):
            return f"{cmd} succeeded"
        missing = [p for p in phrases if p not in reply.get("error", "")]
        return f"{cmd} failed with {reply.get('error')!r}" if missing else None

    return check


def replica_holds(node: Callable[[DemoContext], str], want: list[Any]) -> Check:
    """The step's `clock` reply shows exactly these live values on that node."""

    def check(ctx: DemoContext) -> str | None:
        clock = ctx.reply("clock")
        name = node(ctx)
        versions = clock.get("replicas", {}).get(name)
        if versions is None:
            return f"{name} is down or not a replica of the key"
        values = [v["value"] for v in versions if not v.get("tombstone")]
        return None if _same_values(values, want) else f"{name} holds {show(values)}"

    return check


def all_replicas_equal(ctx: DemoContext) -> str | None:
    clock = ctx.reply("clock")
    odd = [f"{r['a']} {r['relation']} {r['b']}" for r in clock["relations"] if r["relation"] != "equal"]
    if None in clock["replicas"].values():
        return "a replica is down"
    return f"not every replica agrees: {', '.join(odd)}" if odd else None


def nth_replica(i: int) -> Callable[[DemoContext], str]:
    return lambda ctx: ctx.replicas()[i]


def prefs_shows_down(i: int) -> Check:
    """The step's `prefs` reply shows the key's i-th home replica down."""

    def check(ctx: DemoContext) -> str | None:
        name = ctx.replicas()[i]
        return None if ctx.reply("prefs")["up"].get(name) is False else f"prefs shows {name} up"

    return check


def prefs_sizes(replicas: int, fallbacks: int) -> Check:
    def check(ctx: DemoContext) -> str | None:
        got = (len(ctx.replicas()), len(ctx.fallbacks()))
        return None if got == (replicas, fallbacks) else f"prefs lists {got[0]} replicas, {got[1]} fallbacks"

    return check


def metric_at_least(name: str, least: int = 1) -> Check:
    """The step's `metrics` reply counts at least `least` of `name` (stale_reads, read_repairs)."""

    def check(ctx: DemoContext) -> str | None:
        got = ctx.reply("metrics")[name]
        return None if got >= least else f"the metrics show {name} = {got}"

    return check


def home_holds(i: int, want: list[Any]) -> Check:
    return replica_holds(nth_replica(i), want)
