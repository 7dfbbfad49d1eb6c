"""`bhandar sim ring|quorum|versions|ministore`: the seed's four simulators from the command line.

This module only parses and validates options and prints; the simulators are in
`bhandar_cli/sim/seeds/seed_*.py` and are imported inside each command so `bhandar --help` stays fast.

Numeric options are taken as text and parsed here rather than typed as `int`: click reports a
malformed integer with a multi-line usage box, and every bad value here should give the same
one-line error and exit code 2.
"""

from __future__ import annotations

import re
import sys

import typer

from bhandar_cli.cli.output import OUTPUT_OPTION, emit_json, fail
from bhandar_cli.client import EXIT_USAGE, OutputFormat

sim_app = typer.Typer(
    help="Four small teaching simulations with fixed seeds (ring, quorum, versions, ministore), "
    "and the Bloom filter measured.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)

# mulberry32 seeds are 32-bit; counts are capped so a typo cannot start an hour-long run.
SEED_MAX = 2**32 - 1
COUNT_MAX = 10_000_000
VNODES_MAX = 100_000
_INT = re.compile(r"-?[0-9]+")


def _parse_int(option: str, text: str, lo: int, hi: int) -> int:
    value = text.strip()
    if not _INT.fullmatch(value) or not lo <= int(value) <= hi:
        fail(f"{option} must be an integer from {lo} to {hi}, got {text!r}", EXIT_USAGE)
    return int(value)


def _parse_vnodes(text: str) -> list[int]:
    parts = text.split(",")
    if not text.strip() or any(not _INT.fullmatch(p.strip()) or not 1 <= int(p) <= VNODES_MAX for p in parts):
        fail(
            f"--vnodes must be a comma-separated list of integers from 1 to {VNODES_MAX}, got {text!r}",
            EXIT_USAGE,
        )
    return [int(p) for p in parts]


def _print(text: str) -> None:
    # The tables are the seed's exact text, so they bypass rich and click's echo.
    sys.stdout.write(text)
    sys.stdout.flush()


SEED_HELP = f"PRNG seed (mulberry32; 0 to {SEED_MAX})."


@sim_app.command("ring")
def ring(
    seed: str = typer.Option("61", "--seed", metavar="INT", help=SEED_HELP),
    keys: str = typer.Option(
        "20000", "--keys", metavar="INT", help="Number of random keys placed on the ring."
    ),
    vnodes: str = typer.Option(
        "1,10,100", "--vnodes", metavar="V,V,...", help="Virtual nodes per server, one table row each."
    ),
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """Keys per node with V virtual nodes, and keys moved when a fifth node joins."""
    seed_n = _parse_int("--seed", seed, 0, SEED_MAX)
    keys_n = _parse_int("--keys", keys, 1, COUNT_MAX)
    vnodes_list = _parse_vnodes(vnodes)
    from bhandar_cli.sim.seeds import render_ring, ring_json, simulate_ring

    result = simulate_ring(seed_n, keys_n, vnodes_list)
    if output is OutputFormat.json:
        emit_json(ring_json(result))
    else:
        _print(render_ring(result))


@sim_app.command("quorum")
def quorum(
    seed: str = typer.Option("2026", "--seed", metavar="INT", help=SEED_HELP),
    rounds: str = typer.Option(
        "10000",
        "--rounds",
        metavar="INT",
        help="Put-then-get rounds; replica 2 of 3 is down for rounds 3000-5999 whatever this is.",
    ),
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """Quorum put then get on N=3 replicas with one replica down for a while."""
    seed_n = _parse_int("--seed", seed, 0, SEED_MAX)
    rounds_n = _parse_int("--rounds", rounds, 1, COUNT_MAX)
    from bhandar_cli.sim.seeds import quorum_json, render_quorum, simulate_quorum

    result = simulate_quorum(seed_n, rounds_n)
    if output is OutputFormat.json:
        emit_json(quorum_json(result))
    else:
        _print(render_quorum(result))


@sim_app.command("versions")
def versions(output: OutputFormat = OUTPUT_OPTION) -> None:
    """The cart:42 story with vector clocks, siblings, a client merge and LWW."""
    from bhandar_cli.sim.seeds import render_versions, simulate_versions, versions_json

    result = simulate_versions()
    if output is OutputFormat.json:
        emit_json(versions_json(result))
    else:
        _print(render_versions(result))


@sim_app.command("ministore")
def ministore(
    seed: str = typer.Option("54", "--seed", metavar="INT", help=SEED_HELP),
    ops: str = typer.Option(
        "8000",
        "--ops",
        metavar="INT",
        help="Operations per mode; D is down for ops 2000-5999 and E for 4000-5999 whatever this is.",
    ),
    keys: str = typer.Option("300", "--keys", metavar="INT", help="Number of distinct keys."),
    detect: str = typer.Option(
        "300",
        "--detect",
        metavar="INT",
        help="Operations after a node returns before its hints are delivered.",
    ),
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """A mini store, strict vs sloppy quorum vs hinted handoff with two nodes down."""
    seed_n = _parse_int("--seed", seed, 0, SEED_MAX)
    ops_n = _parse_int("--ops", ops, 1, COUNT_MAX)
    keys_n = _parse_int("--keys", keys, 1, COUNT_MAX)
    detect_n = _parse_int("--detect", detect, 0, COUNT_MAX)
    from bhandar_cli.sim.seeds import ministore_json, render_ministore, simulate_ministore

    result = simulate_ministore(seed_n, ops_n, keys_n, detect_n)
    if output is OutputFormat.json:
        emit_json(ministore_json(result))
    else:
        _print(render_ministore(result))


@sim_app.command("bloom")
def bloom(
    bits: str = typer.Option("10", "--bits", metavar="INT", help="Bits per key."),
    hashes: str = typer.Option("7", "--hashes", metavar="INT", help="Hash functions per key."),
    keys: str = typer.Option("100000", "--keys", metavar="INT", help="Keys inserted (and as many probed)."),
    seed: str = typer.Option("0", "--seed", metavar="INT", help="Seed of the random keys."),
    kind: str = typer.Option(
        "classic",
        "--filter",
        metavar="classic|blocked",
        help="classic: k bits anywhere in the filter; blocked: k bits in one 512-bit block (SSTables).",
    ),
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """A Bloom filter: measured vs theoretical false-positive rate. classic: (1 - e^(-k/b))^k;
    blocked (what SSTables are written with: all of a key's bits in one 512-bit block, one check per
    table): that formula averaged over the Poisson-distributed number of keys in a block; its bits
    come from two fixed mask tables, so it measures some 20% above even that."""
    bits_n = _parse_int("--bits", bits, 1, 64)
    hashes_n = _parse_int("--hashes", hashes, 1, 32)
    keys_n = _parse_int("--keys", keys, 1, COUNT_MAX)
    seed_n = _parse_int("--seed", seed, 0, SEED_MAX)
    if kind not in ("classic", "blocked"):
        fail(f"--filter must be classic or blocked, got {kind!r}", EXIT_USAGE)
    from bhandar_cli.storage import measure_false_positive_rate

    r = measure_false_positive_rate(bits_n, hashes_n, keys_n, seed_n, blocked=kind == "blocked")
    if output is OutputFormat.json:
        emit_json({"cmd": "sim bloom", "ok": True, "filter": kind, **r})
        return
    measured, theory = float(r["measured"]), float(r["theoretical"])
    off = (measured - theory) / theory * 100 if theory else 0.0
    formula = "(1-e^(-k/b))^k" if kind == "classic" else "(blocked)     "
    _print(
        f"{kind} Bloom filter: {bits_n} bits per key, {hashes_n} hashes, {keys_n} keys, "
        f"{keys_n} absent probes\n"
        f"measured false positives    {100 * measured:.3f}%\n"
        f"theoretical {formula}  {100 * theory:.3f}%\n"
        f"difference                  {off:+.1f}% of theoretical\n"
    )


def _parse_sizes(text: str) -> tuple[int, ...]:
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or any(not _INT.fullmatch(p) or not SCALE_MIN <= int(p) <= SCALE_MAX for p in parts):
        fail(
            f"--nodes must be a comma-separated list of sizes from {SCALE_MIN} to {SCALE_MAX}, got {text!r}",
            EXIT_USAGE,
        )
    return tuple(int(p) for p in parts)


SCALE_MIN, SCALE_MAX = 6, 1000


@sim_app.command("scale")
def scale(
    nodes: str = typer.Option(
        "24,48,120,240", "--nodes", metavar="N,N,...", help="Cluster sizes, one table row each."
    ),
    seed: str = typer.Option("18", "--seed", metavar="INT", help="Seed of the runs."),
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """The real core at each cluster size: gossip per node beside the all-to-all heartbeat baseline,
    failure detection and membership spread times, anti-entropy per node per hour and repair age,
    and the hints a whole-zone outage piles up."""
    sizes = _parse_sizes(nodes)
    seed_n = _parse_int("--seed", seed, 0, SEED_MAX)
    from bhandar_cli.sim import render_scale, run_scale

    result = run_scale(sizes, seed_n)
    if output is OutputFormat.json:
        emit_json({"cmd": "sim scale", "ok": True, **result})
    else:
        _print(render_scale(result))
