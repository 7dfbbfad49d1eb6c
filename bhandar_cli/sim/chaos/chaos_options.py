"""What a chaos run is asked for (`ChaosOptions`: what the person fixed, checked here as they
typed it) and what it resolves to (`ChaosParams`: every parameter, drawn from the seed where the
options leave it open; chaos_run.py draws them).

The checks speak in `bhandar chaos`'s option names, as the replay line of a report does
(report.py): a chaos run is asked for by those names wherever it starts (the command line, a swarm,
a test). A bad value is `BadInput` with one line that says which option and what it takes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bhandar_cli.core.model import LEVELS, BadInput, NodeConfig, one_of
from bhandar_cli.sim.chaos.fault_injector import FAULT_KINDS, FaultParams

SEED_MAX = 2**63 - 1
OPS_MAX = 10_000_000
NODES_MAX = 1000  # simulated nodes are cheap; beyond Z they are named AA, AB, ...
STORAGES = ("memory", "lsm")
# Test-only planted bugs: each must make the checker fail (tests/sim/chaos/test_chaos.py shows it does).
KNOWN_BUGS = ("ack_before_quorum", "ack_before_sync")
DEFAULT_HINT_AGE = NodeConfig().hint_max_age
_INT = re.compile(r"[0-9]+")


@dataclass(frozen=True, slots=True)
class ChaosOptions:
    """What the user fixed; `None` means "draw it from the seed"."""

    seed: int
    ops: int
    nodes: int | None = None
    replicas: int | None = None
    faults: tuple[str, ...] | None = None
    consistency: str | None = None
    keys: int | None = None
    clients: int | None = None
    bugs: tuple[str, ...] = ()  # test-only: planted bugs (NodeConfig.bugs)
    storage: str | None = None  # memory | lsm
    hot: float = 0.0  # skew: this fraction of operations go to one key (never drawn)


@dataclass(frozen=True, slots=True)
class ChaosParams:
    """Every parameter of a run, resolved."""

    seed: int
    ops: int
    nodes: int
    zones: int
    vnodes: int
    replicas: int
    levels: tuple[str, ...]
    clients: int
    keys: int
    request_timeout: float
    gossip_interval: float
    phi_pause: float
    hint_interval: float
    think: float
    faults: FaultParams
    bugs: tuple[str, ...]
    cluster_seed: int
    workload_seed: int
    fault_seed: int
    hint_max_age: float = DEFAULT_HINT_AGE
    storage: str = "memory"
    storage_seed: int = 0
    hot: float = 0.0
    addressing: bool = False  # process-mode membership: seeds by address (see sim/sim_cluster.py)


def parse_int(option: str, text: str | None, lo: int, hi: int) -> int | None:
    """The integer `text` gives `option` (None when not given); BadInput outside lo..hi."""
    if text is None:
        return None
    value = text.strip()
    if not _INT.fullmatch(value) or not lo <= int(value) <= hi:
        raise BadInput(f"{option} must be an integer from {lo} to {hi}, got {text!r}")
    return int(value)


def parse_fraction(option: str, text: str | None) -> float:
    if text is None:
        return 0.0
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise BadInput(f"{option} must be a fraction from 0 to 1, got {text!r}")
    return value


def parse_faults(text: str | None) -> tuple[str, ...] | None:
    if text is None:
        return None
    value = text.strip().lower()
    if value == "all":
        return FAULT_KINDS
    if value in ("none", ""):
        return ()
    kinds = [k.strip() for k in value.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in FAULT_KINDS]
    if unknown:
        choices = ", ".join(FAULT_KINDS)
        raise BadInput(f"unknown fault {unknown[0]!r} in --faults (use all, none or a list of: {choices})")
    return tuple(k for k in FAULT_KINDS if k in kinds)  # a canonical order, so reproduce lines agree


def options_from_flags(
    *,
    seed: int,
    ops: str | None = None,
    nodes: str | None = None,
    replicas: str | None = None,
    faults: str | None = None,
    consistency: str | None = None,
    keys: str | None = None,
    clients: str | None = None,
    bugs: tuple[str, ...] = (),
    storage: str | None = None,
    hot: float = 0.0,
) -> ChaosOptions:
    """The options of one run from what a person typed (the seed already chosen: given, or drawn
    by whoever starts the run), checked in the order the command line lists them."""
    ops_n = parse_int("--ops", ops, 1, OPS_MAX)
    nodes_n = parse_int("--nodes", nodes, 2, NODES_MAX)
    replicas_n = parse_int("--replicas", replicas, 1, 9)
    keys_n = parse_int("--keys", keys, 1, 1_000_000)
    clients_n = parse_int("--clients", clients, 1, 10_000)
    if replicas_n is not None and nodes_n is not None and replicas_n > nodes_n:
        raise BadInput(f"--replicas {replicas_n} needs at least {replicas_n} nodes (--nodes is {nodes_n})")
    level = None
    if consistency is not None:
        level = consistency.strip().upper()
        if level not in LEVELS:
            raise BadInput(f"--consistency must be {one_of(LEVELS)}, got {consistency!r}")
    for name in bugs:
        if name not in KNOWN_BUGS:
            raise BadInput(f"unknown --bug {name!r} (known: {', '.join(KNOWN_BUGS)})")
    kind = None
    if storage is not None:
        kind = storage.strip().lower()
        if kind not in STORAGES:
            raise BadInput(f"--storage must be memory or lsm, got {storage!r}")
    return ChaosOptions(
        seed=seed,
        ops=2000 if ops_n is None else ops_n,
        nodes=nodes_n,
        replicas=replicas_n,
        faults=parse_faults(faults),
        consistency=level,
        keys=keys_n,
        clients=clients_n,
        bugs=tuple(bugs),
        storage=kind,
        hot=hot,
    )
