"""One check, from the first process to the verdict.

The seed draws everything the harness decides: the faults (check/nemesis.py), each client's
operations and pauses, the network's losses, duplicates and latencies, the services' choices.
(The nodes' own timing is the machine's: a run under real processes repeats its plan, not its
every interleaving.) The order of a run:

1. start `node_count` copies of the program (n0..n(N-1), as Maelstrom names them) and send each
   `init` (from c0); a node that cannot be started, exits, or does not answer `init_ok` within
   `init_timeout` is a setup error;
2. the workload's setup messages (broadcast's `topology`), each sent until answered (at most
   `init_timeout`);
3. time 0: the clients (c1..cM) run for `time_limit` while the nemesis applies the plan (a node
   killed and restarted gets `init` and its setup messages again);
4. every fault ends (partitions healed, killed nodes restarted, paused ones continued), the
   nodes get `recovery` seconds (10 by default: Maelstrom waits 10 s), and the workload's final
   reads run;
5. every process is stopped (nothing is left running), and the workload's checker judges the
   history. Nodes that exited unasked or did not come back after a kill make it invalid.

A node that breaks the protocol (garbage, a malformed answer, a flood) ends the run at once: the
outcome carries the error, naming the node and the message, and no verdict.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from random import Random

import trio

from bhandar_cli.check.catalog import scenarios
from bhandar_cli.check.clients import Account, Clients
from bhandar_cli.check.cluster import NodeCluster, SetupError
from bhandar_cli.check.maelstrom_history import (
    INVALID,
    UNKNOWN,
    VALID,
    MaelstromHistory,
    Problem,
    Verdict,
    with_availability,
    with_recovery_hint,
)
from bhandar_cli.check.nemesis import Fault, draw, scenario
from bhandar_cli.check.protocol import MaelstromProtocolError
from bhandar_cli.check.router import Envelope, Router
from bhandar_cli.check.services import services
from bhandar_cli.check.workloads import workloads
from bhandar_cli.host import Distribution, LatencyModel

RECOVERY = 10.0  # seconds between the heal and the final reads: Maelstrom's wait


@dataclass(frozen=True, kw_only=True)
class CheckOptions:
    argv: tuple[str, ...]
    workload: str
    log_dir: str
    node_count: int = 3
    concurrency: int = 3
    rate: float = 20.0  # operations per second, all clients together
    time_limit: float = 5.0
    latency_ms: float = 0.0  # mean latency between nodes and to services (clients: none)
    seed: int = 0
    nemesis: tuple[str, ...] = ()
    interval: float = 1.0  # seconds: a fault's length and the pause before the next are drawn from it
    op_timeout: float = 5.0  # Maelstrom's client timeout (see default_timeout)
    recovery: float = RECOVERY
    init_timeout: float = 10.0
    flood_limit: int = 10_000
    scenario: str = ""  # a checklist scenario (the workload's name for it) instead of a draw
    # Faults given outright by a library caller (a test that must strike every operation), instead
    # of a scenario or a draw; the report prints them, as it prints every plan.
    plan: tuple[Fault, ...] = ()
    availability: float | None = None  # the share of operations that must succeed (1.0: total)
    consistency_models: tuple[str, ...] = ()  # txn workloads: the models judged (default: Maelstrom's)
    # Maelstrom's --latency-dist: the shape of the latency around its mean (constant by default).
    latency_dist: Distribution = "constant"
    # The duplicate fault copies clients' requests too, not only messages between nodes.
    duplicate_clients: bool = False


@dataclass
class CheckOutcome:
    options: CheckOptions
    nodes: list[str]
    faults: list[Fault]
    history: MaelstromHistory
    verdict: Verdict | None = None
    error: str = ""  # a setup or protocol error: the run could not be judged
    journal: list[Envelope] = field(default_factory=list)
    journal_full: bool = False
    events: list[str] = field(default_factory=list)
    messages: dict[str, int] = field(default_factory=dict)
    network: dict[str, int] = field(default_factory=dict)
    late_answers: int = 0  # late or unmatched, all nodes together
    answers: dict[str, Account] = field(default_factory=dict)  # node asked -> what it answered
    net: dict[str, dict[str, float | int | None]] = field(default_factory=dict)  # check/net_stats.py
    restarts: int = 0
    real_seconds: float = 0.0

    @property
    def exit_code(self) -> int:
        if self.error:
            return 2
        return 0 if self.verdict is not None and self.verdict.valid else 1


def latency_model(mean_ms: float, distribution: Distribution = "constant") -> LatencyModel | None:
    if mean_ms <= 0:
        return None
    return LatencyModel(base_ms=0.0, mean_ms=mean_ms, spike_rate=0.0, distribution=distribution)


def default_timeout(workload: str, latency_ms: float) -> float:
    """How long a client waits for an answer unless told: Maelstrom's, 5 s, and for lin-kv ten
    times the mean latency but at least 1 s."""
    return max(1.0, 10 * latency_ms / 1000.0) if workload == "lin-kv" else 5.0


def run_check(opts: CheckOptions) -> CheckOutcome:
    """Run one check (its own trio loop) and judge it."""
    return trio.run(check_on_loop, opts)


async def check_on_loop(opts: CheckOptions) -> CheckOutcome:
    """Run one check on the trio loop that is running (a sweep runs several on one) and judge it."""
    started = time.monotonic()
    outcome = await _run(opts)
    outcome.real_seconds = time.monotonic() - started
    save_history(outcome)
    return outcome


def run_checks(
    many: list[CheckOptions],
    jobs: int = 0,
    started: Callable[[CheckOptions], None] = lambda _: None,
    finished: Callable[[CheckOutcome], None] = lambda _: None,
) -> list[CheckOutcome]:
    """Several checks on one trio loop, `jobs` at a time (0: all at once), each with its own
    processes and directory (check/checked_process.py marks each run's processes); the outcomes
    in the order of `many`. `started` hears of each run as it begins, `finished` as it ends (a
    sweep prints each seed's line then, and keeps them if Ctrl-C stops the rest)."""
    outcomes: list[CheckOutcome | None] = [None] * len(many)
    slots = trio.Semaphore(jobs or max(1, len(many)))

    async def all_of() -> None:
        async def one(i: int) -> None:
            try:
                outcomes[i] = outcome = await check_on_loop(many[i])
                finished(outcome)
            finally:
                slots.release()

        async with trio.open_nursery() as nursery:
            for i in range(len(many)):
                await slots.acquire()
                started(many[i])
                nursery.start_soon(one, i)

    trio.run(all_of)
    return [o for o in outcomes if o is not None]


def with_answers(verdict: Verdict, history: MaelstromHistory, accounts: dict[str, Account]) -> Verdict:
    """The verdict, made invalid by answers that match no request (a node that answers with the
    wrong `in_reply_to`, or none, escapes every checker, which judges matched answers only). A valid
    verdict with nothing answered `*_ok` is unknown, and one with nodes that answered none of their
    requests `*_ok` says what those nodes did instead, with the counts."""
    found = [
        Problem("unmatched", unmatched_text(node, account))
        for node, account in sorted(accounts.items())
        if account.unmatched
    ]
    if found:
        summary = " ".join(p.text for p in found)
        if verdict.status != VALID:
            summary += " " + verdict.summary
        return Verdict(INVALID, summary, tuple(found) + verdict.problems, verdict.stats, verdict.staleness)
    asked: dict[str, int] = {}
    answered: set[str] = set()
    for op in history.ops:
        asked[op.node] = asked.get(op.node, 0) + 1
        if op.ok:
            answered.add(op.node)
    silent = [
        silent_text(node, n, accounts.get(node, Account()))
        for node, n in asked.items()
        if node not in answered
    ]
    if not silent or verdict.status != VALID:
        return verdict
    if not answered:
        return Verdict(UNKNOWN, f"Nothing to judge: {'; '.join(silent)}.", (), verdict.stats)
    return replace(verdict, summary=f"{verdict.summary} But {'; '.join(silent)}.")


def unmatched_text(node: str, account: Account) -> str:
    """`n1 sent 9 answers that match no request of their client (...): '...'`."""
    without = account.without_reply_to
    why = ", ".join(
        part
        for part in (
            f"{without} without in_reply_to" if without else "",
            f"{account.unmatched - without} whose in_reply_to is no msg_id that client sent and awaits"
            if account.unmatched > without
            else "",
        )
        if part
    )
    quoted = "; ".join(repr(raw) for raw in account.samples)
    return f"{node} sent {account.unmatched} answers that match no request of their client ({why}): {quoted}."


def silent_text(node: str, asked: int, account: Account) -> str:
    """What a node that answered none of its requests `*_ok` did instead."""
    did = []
    if account.errors:
        errors = sum(account.errors.values())
        did.append(f"{errors} errors ({'; '.join(account.error_lines()[:3])})")
    if account.late:
        did.append(f"{account.late} answers came after their request had timed out (--timeout)")
    if account.unmatched:
        did.append(f"{account.unmatched} answers matched no request")
    if not did:
        return f"{node} answered none of its {asked} requests (no answer came)"
    return f"{node} answered none of its {asked} requests with *_ok: " + ", ".join(did)


def with_events(verdict: Verdict, events: list[str]) -> Verdict:
    """The verdict, made invalid by what nodes did unasked (exits, failed restarts)."""
    if not events:
        return verdict
    found = tuple(Problem("node", f"{e}.") for e in events)
    summary = " ".join(p.text for p in found)
    if verdict.status != VALID:
        summary += " " + verdict.summary
    return Verdict(INVALID, summary, found + verdict.problems, verdict.stats, verdict.staleness)


async def _run(opts: CheckOptions) -> CheckOutcome:
    rng = Random(opts.seed)
    names = [f"n{i}" for i in range(opts.node_count)]
    workload = workloads()[opts.workload](Random(rng.getrandbits(64)), names)
    workload.consistency_models = opts.consistency_models or workload.consistency_models
    net_rng, service_rng, fault_rng = (Random(rng.getrandbits(64)) for _ in range(3))
    client_rngs = [Random(rng.getrandbits(64)) for _ in range(opts.concurrency)]
    if opts.plan:
        faults = list(opts.plan)
    elif opts.scenario:
        # the workload's name for a plan, or (a library caller) the plan's own name
        plan = scenarios(opts.workload).get(opts.scenario, opts.scenario)
        faults = scenario(plan, names, opts.time_limit)
    else:
        faults = draw(fault_rng, list(opts.nemesis), names, opts.time_limit, opts.interval)
    log_dir = fresh_log_dir(Path(opts.log_dir), names)
    history = MaelstromHistory()
    outcome = CheckOutcome(opts, names, faults, history)
    run_scope = trio.CancelScope()

    def protocol_error(exc: MaelstromProtocolError) -> None:
        if not outcome.error:
            outcome.error = f"protocol error: {exc}"
        run_scope.cancel()

    client_ids = frozenset(f"c{i}" for i in range(1, opts.concurrency + 1))
    cluster = NodeCluster(
        names, list(opts.argv), log_dir, dict(os.environ), opts.flood_limit, protocol_error, client_ids
    )
    clients: Clients | None = None

    def on_client(msg: object) -> None:
        if clients is not None:
            clients.on_answer(msg)  # type: ignore[arg-type]

    router = Router(
        cluster.procs,
        net_rng,
        latency_model(opts.latency_ms, opts.latency_dist),
        on_client,
        services(service_rng),
        trio.current_time(),
        opts.duplicate_clients,
    )
    cluster.attach(router)
    clients = Clients(router, workload, history, opts.op_timeout, protocol_error)
    setup = workload.setup()

    async def resetup(node: str) -> None:
        await _setup(clients, cluster, [(n, body) for n, body in setup if n == node], opts)

    cluster.resetup = resetup
    async with trio.open_nursery() as nursery:
        nursery.start_soon(router.run)
        try:
            with run_scope:
                await cluster.start(nursery, names, opts.init_timeout)
                await _setup(clients, cluster, setup, opts)
                router.restart_clock()
                async with trio.open_nursery() as work:
                    work.start_soon(_nemesis, cluster, nursery, work, faults, router, opts.init_timeout)
                    pause = opts.concurrency / opts.rate
                    for i, client_rng in enumerate(client_rngs, start=1):
                        node = names[(i - 1) % len(names)]
                        work.start_soon(clients.run, i, node, client_rng, opts.time_limit, pause)
                await _heal(cluster, nursery, opts.init_timeout)
                await trio.sleep(opts.recovery)
                await clients.finals(opts.concurrency)
        except SetupError as exc:
            outcome.error = f"setup error: {exc}"
        finally:
            await cluster.stop()
            nursery.cancel_scope.cancel()
    for op in history.ops:  # a run cut short leaves operations without an outcome
        op.gave_up(router.now(), "the run ended first")
    outcome.journal, outcome.journal_full = router.journal, router.journal_full
    outcome.events = cluster.events
    outcome.messages = dict(router.counts)
    outcome.network = {"sent": router.model.sent, "dropped": router.model.dropped}
    outcome.late_answers = clients.late
    outcome.answers = dict(sorted(clients.accounts.items()))
    outcome.net = router.stats.plain(len(history.ops))
    outcome.restarts = cluster.restarts
    if not outcome.error:
        outcome.verdict = with_recovery_hint(
            with_events(
                with_availability(
                    with_answers(workload.check(history), history, outcome.answers),
                    history,
                    opts.availability,
                ),
                outcome.events,
            ),
            opts.recovery,
        )
    return outcome


def fresh_log_dir(log_dir: Path, names: list[str]) -> Path:
    """The run's directory, without what an earlier run there left (logs, the nodes' data)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(log_dir / "data", ignore_errors=True)
    for name in names:
        (log_dir / f"{name}.log").unlink(missing_ok=True)
    return log_dir


async def _setup(
    clients: Clients, cluster: NodeCluster, requests: list[tuple[str, dict[str, object]]], opts: CheckOptions
) -> None:
    """The workload's setup requests (node, body), each answered with its `*_ok`: one with no
    answer is sent again until `init_timeout` has passed (a loaded machine, or a fault on a
    restarted node, may hold it up as it may hold `init`); any other answer, or none in that
    time, is a SetupError. A node killed meanwhile gets them anew in its next life."""
    for node, body in requests:
        proc = cluster.procs[node]
        life = proc.life
        deadline = trio.current_time() + opts.init_timeout
        answer = await clients.call("c1", node, body)
        while answer is None and trio.current_time() < deadline and proc.life == life and not proc.killed:
            answer = await clients.call("c1", node, body)
        if answer is None and (proc.life != life or proc.killed):
            continue
        if answer is None or answer.type != f"{body['type']}_ok":
            got = "no answer" if answer is None else repr(answer.raw.decode("utf-8", "replace")[:200])
            raise SetupError(
                f"{node} did not answer {body['type']} with {body['type']}_ok "
                f"within {opts.init_timeout:g} s ({got})"
            )


async def _nemesis(
    cluster: NodeCluster,
    nursery: trio.Nursery,
    work: trio.Nursery,
    faults: list[Fault],
    router: Router,
    init_timeout: float,
) -> None:
    steps = sorted(
        [(f.start, 0, i) for i, f in enumerate(faults)] + [(f.end, 1, i) for i, f in enumerate(faults)]
    )
    for at, ending, i in steps:
        await trio.sleep_until(router.start + at)
        if ending:
            work.start_soon(cluster.end, nursery, faults[i], init_timeout)
        else:
            cluster.begin(faults[i])


async def _heal(cluster: NodeCluster, nursery: trio.Nursery, init_timeout: float) -> None:
    """End every fault: the network whole again, paused nodes continued, killed nodes back."""
    router = cluster.router
    assert router is not None
    router.network.heal()
    model = router.model
    model.loss = model.duplicate = 0.0
    model.extra_delay.clear()
    for proc in cluster.procs.values():
        proc.resume()
    for name, proc in cluster.procs.items():
        if proc.killed and not proc.running:
            await cluster.restart(nursery, name, init_timeout)


def save_history(outcome: CheckOutcome) -> None:
    """The history as JSON lines in the log directory, for a person or a script to dig into."""
    path = Path(outcome.options.log_dir) / "history.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for op in outcome.history.ops:
            row = {
                "index": op.index,
                "client": op.client,
                "node": op.node,
                "f": op.f,
                "value": op.value,
                "type": op.type,
                "invoked": round(op.invoked, 6),
                "completed": round(op.completed, 6) if math.isfinite(op.completed) else None,
                "result": sorted(op.result) if isinstance(op.result, frozenset) else op.result,
                "error": op.error,
                "final": op.final,
            }
            out.write(json.dumps(row, default=str) + "\n")
