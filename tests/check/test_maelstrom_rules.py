"""The harness follows Maelstrom's rules where a node written for Maelstrom depends on them: nodes
are n0..n(N-1); a node may pass a client's request on to another node unchanged and any node may
answer the client (but may not speak as another node); `duplicate` copies messages between nodes
only unless asked; a restarted node gets its `topology` again; nothing a node started outlives
the run, even outside its session; the latency's shape is Maelstrom's (constant by default).
The short runs go at once (one trio loop)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from random import Random
from typing import Any, cast

import pytest
import trio
import trio.testing
import typer
from typer.testing import CliRunner

from bhandar_cli.check.check_run import CheckOutcome, run_checks
from bhandar_cli.check.checked_process import CheckedProcess
from bhandar_cli.check.nemesis import Fault
from bhandar_cli.check.protocol import decode, encode
from bhandar_cli.check.router import Envelope, Router
from bhandar_cli.cli.check_cmd import check
from bhandar_cli.host.network import LatencyModel
from tests.check.support import alive, py, short

DUPLICATE = (Fault("duplicate", 0.1, 0.9, (), 1.0),)
CUT_OFF_N1 = (Fault("partition", 0.05, 0.95, ("n1",)),)
KILL_N1 = (Fault("kill", 0.1, 0.35, ("n1",)),)
KILL_N0 = (Fault("kill", 0.1, 0.4, ("n0",)),)

# name -> (node program, workload, faults, other options)
RUNS: dict[str, tuple[tuple[str, ...], str, tuple[Fault, ...], dict[str, Any]]] = {
    "forward": (py("forward.py"), "echo", (), {}),
    "forward-partitioned": (py("forward.py"), "echo", CUT_OFF_N1, {}),
    "impostor": (py("forward.py", MODE="impostor"), "echo", (), {}),
    "twice": (py("counter.py", MODE="twice"), "g-counter", DUPLICATE, {}),
    "twice-clients": (py("counter.py", MODE="twice"), "g-counter", DUPLICATE, {"duplicate_clients": True}),
    "restart": (py("neighbours.py"), "broadcast", KILL_N1, {"recovery": 0.6}),
    "escapes": (py("escapes.py"), "echo", KILL_N0, {}),
    "constant": (py("sets.py"), "broadcast", (), {"latency_ms": 20.0}),
}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CheckOutcome]:
    root = tmp_path_factory.mktemp("rules")
    # Two nodes, two clients (c1 at n0, c2 at n1) and a roomy timeout: eight runs go at once on a
    # machine that may be loaded.
    small: dict[str, Any] = {"node_count": 2, "concurrency": 2, "op_timeout": 1.0}
    runs = [
        short(argv, workload, root / name, nemesis=tuple({f.kind for f in plan}), plan=plan, **small | more)
        for name, (argv, workload, plan, more) in RUNS.items()
    ]
    return dict(zip(RUNS, run_checks(runs), strict=True))


def test_nodes_are_named_from_n0_as_in_maelstrom(outcomes: dict[str, CheckOutcome]) -> None:
    assert outcomes["forward"].nodes == ["n0", "n1"]


def test_a_client_request_passed_on_unchanged_is_answered_by_the_leader(
    outcomes: dict[str, CheckOutcome],
) -> None:
    outcome = outcomes["forward"]
    assert outcome.exit_code == 0, (outcome.error, outcome.verdict)
    passed_on = [e for e in outcome.journal if e.src.startswith("c") and e.sender == "n1"]
    assert passed_on and all(e.dest == "n0" for e in passed_on)
    answered_by_n0 = {op.client for op in outcome.history.ops if op.ok and op.node != "n0"}
    assert answered_by_n0 == {"c2"}, "the client of n1 had its answers from n0"


def test_a_request_passed_on_crosses_the_link_between_the_two_nodes(
    outcomes: dict[str, CheckOutcome],
) -> None:
    """While n1 is cut off, what it passes on to n0 is lost, as any message from n1 to n0."""
    outcome = outcomes["forward-partitioned"]
    assert outcome.exit_code == 0, (outcome.error, outcome.verdict)
    fault = CUT_OFF_N1[0]
    n1_to_n0 = [e for e in outcome.journal if e.sender == "n1" and e.dest == "n0" and e.src.startswith("c")]
    lost = [e.sent for e in n1_to_n0 if e.arrived is None]
    assert lost, "what n1 passed on during the partition was lost"
    # From the first loss (the partition began: a loaded machine may start it a little late) to
    # the fault's end (the heal is never early), nothing n1 passed on got through.
    assert all(e.arrived is None for e in n1_to_n0 if min(lost) <= e.sent < fault.end)
    assert all(fault.start <= t for t in lost)
    assert any(op.client == "c2" and op.type == "info" and not op.final for op in outcome.history.ops)


def test_a_node_that_speaks_as_another_node_is_refused(outcomes: dict[str, CheckOutcome]) -> None:
    outcome = outcomes["impostor"]
    assert outcome.exit_code == 2 and outcome.verdict is None
    assert "n1 wrote a message claiming to come from 'n0'" in outcome.error
    assert "never as another node or a service" in outcome.error


def test_duplicate_leaves_client_requests_alone_unless_asked(outcomes: dict[str, CheckOutcome]) -> None:
    """A counter that counts a retransmitted add twice passes Maelstrom's duplicate fault (which
    copies messages between nodes only) and is caught when clients' requests are copied too."""
    plain, clients = outcomes["twice"], outcomes["twice-clients"]
    assert plain.exit_code == 0, (plain.error, plain.verdict)
    assert clients.exit_code == 1 and clients.verdict is not None
    assert "wrong-sum" in {p.kind for p in clients.verdict.problems}, clients.verdict.summary
    arrived = [(e.src, e.body.get("msg_id")) for e in clients.journal if e.src.startswith("c") and e.arrived]
    assert len(arrived) > len(set(arrived)), "clients' requests arrived twice"
    arrived = [(e.src, e.body.get("msg_id")) for e in plain.journal if e.src.startswith("c") and e.arrived]
    assert len(arrived) == len(set(arrived)), "no client's request arrived twice"


def test_a_restarted_node_gets_its_topology_again(outcomes: dict[str, CheckOutcome]) -> None:
    outcome = outcomes["restart"]
    assert outcome.exit_code == 0, (outcome.error, outcome.verdict)
    assert outcome.restarts == 1
    to_n1 = [e.body["type"] for e in outcome.journal if e.dest == "n1" and e.src.startswith("c")]
    assert to_n1.count("init") == 2 and to_n1.count("topology") >= 2
    assert "topology" in to_n1[to_n1.index("init", 1) :], "the second life got its topology"


def test_nothing_a_node_started_outside_its_session_outlives_the_run(
    outcomes: dict[str, CheckOutcome],
) -> None:
    outcome = outcomes["escapes"]
    assert outcome.exit_code == 0, (outcome.error, outcome.verdict)
    assert outcome.restarts == 1
    pids = [int(p) for p in (Path(outcome.options.log_dir) / "data" / "pids").read_text().split()]
    assert len(pids) == 9  # three lives (two nodes, one restart), each with two children
    deadline = time.monotonic() + 5.0
    left = [pid for pid in pids if alive(pid)]
    while left and time.monotonic() < deadline:
        os.sched_yield()
        left = [pid for pid in left if alive(pid)]
    for pid in left:  # the test stops what the harness failed to
        os.kill(pid, signal.SIGKILL)
    assert not left


def test_constant_latency_delays_every_message_between_nodes_by_the_mean(
    outcomes: dict[str, CheckOutcome],
) -> None:
    outcome = outcomes["constant"]
    assert outcome.exit_code == 0, (outcome.error, outcome.verdict)
    nodes = set(outcome.nodes)
    hops = [e.arrived - e.sent for e in outcome.journal if e.src in nodes and e.dest in nodes and e.arrived]
    assert len(hops) > 20
    assert min(hops) >= 0.020 - 1e-9  # a timer never fires early: none arrived before the mean


@pytest.mark.parametrize(
    ("shape", "low", "high"), [("constant", 20.0, 20.0), ("uniform", 0.0, 40.0), ("exponential", 0.0, 1e9)]
)
def test_the_latency_shapes_around_their_mean(shape: str, low: float, high: float) -> None:
    model = LatencyModel(base_ms=0.0, mean_ms=20.0, spike_rate=0.0, distribution=shape)  # type: ignore[arg-type]
    rng = Random(5)
    samples = [model.sample(rng) * 1000 for _ in range(4000)]
    assert low <= min(samples) and max(samples) <= high
    assert abs(sum(samples) / len(samples) - 20.0) < 1.5  # the mean is --latency for every shape
    if shape == "uniform":
        assert min(samples) < 2 and max(samples) > 38


class Planned(Exception):
    """Raised by the stand-in for run_check: the options were built, nothing was run."""


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["-w", "echo"], {"recovery": 10.0, "op_timeout": 5.0, "latency_dist": "constant"}),
        (["-w", "lin-kv"], {"op_timeout": 1.0, "duplicate_clients": False}),
        (["-w", "lin-kv", "--latency", "300ms"], {"op_timeout": 3.0, "latency_ms": 300.0}),
        (
            ["-w", "g-set", "--latency-dist", "uniform", "--duplicate-clients", "--timeout", "2s"],
            {"latency_dist": "uniform", "duplicate_clients": True, "op_timeout": 2.0},
        ),
    ],
)
def test_the_defaults_follow_maelstrom(
    args: list[str], expected: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recovery 10 s (Maelstrom's wait before the final reads); the client timeout 5 s, lin-kv's
    the larger of 1 s and ten mean latencies; latency constant around its mean."""
    import bhandar_cli.check.check_run as run

    planned: list[run.CheckOptions] = []

    def plan_only(opts: run.CheckOptions) -> run.CheckOutcome:
        planned.append(opts)
        raise Planned

    monkeypatch.setattr(run, "run_check", plan_only)
    app = typer.Typer(add_completion=False)
    app.callback()(lambda: None)
    app.command("check")(check)
    result = CliRunner().invoke(app, ["check", "--bin", "true", "-o", "json", *args])
    assert isinstance(result.exception, Planned), result.output
    assert {k: getattr(planned[0], k) for k in expected} == expected


def test_an_unknown_latency_shape_is_a_usage_error() -> None:
    app = typer.Typer(add_completion=False)
    app.callback()(lambda: None)
    app.command("check")(check)
    result = CliRunner().invoke(app, ["check", "--bin", "true", "-w", "echo", "--latency-dist", "normal"])
    assert result.exit_code == 2
    assert "--latency-dist: unknown shape 'normal' (use constant, uniform, exponential)" in result.stderr


class Slot:
    """A stand-in for a node's process: its life, whether it runs, and the lines handed to it."""

    def __init__(self) -> None:
        self.life, self.running, self.lines = 1, True, list[bytes]()

    def send(self, line: bytes) -> bool:
        self.lines.append(line)
        return True


def test_a_message_reaches_only_the_life_it_was_sent_to() -> None:
    """A restarted node hears `init` first: what was sent to its previous life, or while it was
    down, is lost with that life (a node that answered it before `init` would have no id)."""
    slot = Slot()
    heard: list[bytes] = []

    async def main() -> None:
        router = Router(
            cast("dict[str, CheckedProcess]", {"n0": slot}),
            Random(1),
            LatencyModel(base_ms=0.0, mean_ms=100.0, spike_rate=0.0, distribution="constant"),
            lambda msg: None,
            {},
            trio.current_time(),
        )
        router.model.set_delay("n0", 0.1)  # a slow node: even a client's message takes 100 ms
        async with trio.open_nursery() as nursery:
            nursery.start_soon(router.run)
            router.send_to_node("c1", "n0", {"type": "echo", "msg_id": 1})  # to life 1...
            await trio.sleep(0.05)
            slot.life += 1  # ...which dies and restarts before it arrives
            slot.running = False
            router.send_to_node("c1", "n0", {"type": "echo", "msg_id": 2})  # sent while down
            await trio.sleep(0.01)
            slot.running = True
            router.send_to_node("c0", "n0", {"type": "init", "msg_id": 3})  # to life 2
            await trio.sleep(0.5)
            heard.extend(slot.lines)
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert [json.loads(line)["body"]["msg_id"] for line in heard] == [3]


def test_clients_messages_take_no_latency_and_nodes_messages_take_the_mean() -> None:
    """As in Maelstrom, --latency delays messages between nodes (and services), never a client's:
    a client is as if beside its node."""
    nodes = {"n0": Slot(), "n1": Slot()}
    journal: list[Envelope] = []

    async def main() -> None:
        router = Router(
            cast("dict[str, CheckedProcess]", nodes),
            Random(1),
            LatencyModel(base_ms=0.0, mean_ms=100.0, spike_rate=0.0, distribution="constant"),
            lambda msg: None,
            {},
            trio.current_time(),
        )
        async with trio.open_nursery() as nursery:
            nursery.start_soon(router.run)
            router.send_to_node("c1", "n0", {"type": "echo", "msg_id": 1})
            for dest in ("n1", "c1"):
                raw = encode("n0", dest, {"type": "echo_ok", "in_reply_to": 1}).rstrip(b"\n")
                router.from_node(decode(raw, "n0"), "n0")
            await trio.sleep(1.0)
            journal.extend(router.journal)
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    took = {(e.src, e.dest): e.arrived - e.sent for e in journal if e.arrived is not None}
    assert took == {("c1", "n0"): 0.0, ("n0", "n1"): pytest.approx(0.1), ("n0", "c1"): 0.0}
