"""Configuration values: keyspace definitions, consistency levels and node tunables."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Literal, get_args

from bhandar_cli.core.model.durations import UNITS, seconds_of
from bhandar_cli.core.model.errors import BadInput
from bhandar_cli.core.model.limits import MAX_KEY_BYTES, MAX_VALUE_BYTES

# The one declaration of each set of choices; every list, usage line, completion and message
# elsewhere derives from these.
Consistency = Literal["ONE", "QUORUM", "ALL"]
LEVELS: tuple[Consistency, ...] = get_args(Consistency)
POLICIES = ("siblings", "lww", "counter")
QUORUM_MODES = ("sloppy", "strict")
# Time to live of a keyspace's values, in whole seconds (0: values never expire), shown in the
# whole-second units of durations.UNITS.
MAX_TTL = 10 * 365 * 86400
# Keyspace names travel in URLs, file names and completions: a small safe alphabet, no `.` or `..`.
KEYSPACE_NAME = re.compile(r"[a-z0-9_-]{1,64}")
KEYSPACE_NAME_RULE = "1 to 64 characters of a-z, 0-9, _ and -"
# Node ids name certificates, files and log lines: the same kind of safe alphabet.
NODE_ID = re.compile(r"[A-Za-z0-9_.-]{1,32}")
NODE_ID_RULE = "1 to 32 letters, digits, '_', '-' or '.'"
# The name a person gives a node they add to a cluster (`add`, `cluster add`) is narrower: named
# like the A..E a cluster starts with (a capital letter first: never mistaken for a keyspace,
# whose names are lower case), at most 16 characters (the node columns of status and ring), and
# no '.' (the REPL's node completion and `partition A B | C` read it as one word). Every such name
# is a NODE_ID.
NEW_NODE_NAME = re.compile(r"[A-Z][A-Za-z0-9_-]{0,15}")
NEW_NODE_NAME_RULE = "a capital letter, then letters, digits, _ or -"


def one_of(choices: tuple[str, ...]) -> str:
    """The choices as a person reads them: ("ONE", "QUORUM", "ALL") -> "ONE, QUORUM or ALL"."""
    return " or ".join(filter(None, (", ".join(choices[:-1]), choices[-1])))


def parse_level(text: str) -> Consistency:
    level = text.strip().upper()
    if level not in LEVELS:
        raise BadInput(f"unknown consistency level {text!r} (use {one_of(LEVELS)})")
    return level


def required(level: str, n: int) -> int:
    """Replies needed: R or W = 1, floor(N/2)+1 or N."""
    if level == "ONE":
        return 1
    if level == "ALL":
        return n
    return n // 2 + 1


def parse_ttl(text: str) -> int:
    """`60s`, `5m`, `2h`, `1d` or a bare number of seconds -> whole seconds (`0`: no expiry)."""
    seconds = seconds_of(text)
    if seconds is None or not math.isfinite(seconds) or not seconds.is_integer():
        raise BadInput(f"bad ttl {text!r}: use whole seconds, minutes, hours or days, e.g. 60s, 5m, 2h, 1d")
    return int(seconds)


def show_ttl(seconds: int) -> str:
    """60 -> "60s", 300 -> "5m": the largest unit that divides it ("0" for no expiry)."""
    for unit, size in sorted(UNITS.items(), key=lambda u: -u[1]):
        if seconds and size >= 1 and seconds % size == 0:
            return f"{seconds // int(size)}{unit}"
    return "0"


@dataclass(frozen=True, slots=True)
class KeyspaceDef:
    """A keyspace: conflict policy, replication factor, quorum mode and time to live (seconds; 0:
    values never expire). A ttl needs policy=lww: an expiring value has one version, whose write
    timestamp every replica reads the same, so all of them expire it at the same moment."""

    name: str
    policy: str = "siblings"
    n: int = 3
    quorum: str = "sloppy"
    ttl: int = 0

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise BadInput(f"unknown policy {self.policy!r} (use {one_of(POLICIES)})")
        if self.quorum not in QUORUM_MODES:
            raise BadInput(f"unknown quorum mode {self.quorum!r} (use {one_of(QUORUM_MODES)})")
        if not 1 <= self.n <= 9:
            raise BadInput(f"replication factor n={self.n} out of range (1..9)")
        if not valid_keyspace_name(self.name):
            raise BadInput(f"bad keyspace name {self.name!r}: use {KEYSPACE_NAME_RULE}")
        if type(self.ttl) is not int or not 0 <= self.ttl <= MAX_TTL:
            raise BadInput(f"ttl {self.ttl!r} out of range (0 to {MAX_TTL} seconds)")
        if self.ttl and self.policy != "lww":
            raise BadInput(
                f"ttl needs policy=lww, not policy={self.policy} (siblings and counters have no "
                "single write time to expire by)"
            )


def valid_keyspace_name(name: object) -> bool:
    return isinstance(name, str) and KEYSPACE_NAME.fullmatch(name) is not None


# The keyspaces every node has from the start (with the node's default replication factor).
KV = KeyspaceDef("kv")
COUNTERS = KeyspaceDef("counters", policy="counter")


@dataclass(frozen=True, slots=True)
class NodeConfig:
    """Tunables of one node. Times are seconds."""

    default_n: int = 3  # replication factor of kv, counters and keyspaces created without n=
    request_timeout: float = 1.0
    # After answering a read, how long the coordinator keeps listening for slower replicas so it can
    # repair them (bounded by request_timeout).
    read_repair: bool = True
    # Failure detection: gossip with phi accrual (the default), or plain pings (`liveness="ping"`).
    liveness: str = "gossip"
    gossip_interval: float = 0.5
    gossip_fanout: int = 2
    phi_threshold: float = 8.0
    # Acceptable heartbeat pause before phi climbs. With gossip every 0.5 s and threshold 8, a dead
    # node is marked down by every live node of five within 2.5 s on average and 4.1 s at worst
    # over 300 seeds (`detection_bound` adds a margin), with no false downs in 30 minutes of
    # simulated gossip (see tests/core/membership/test_membership.py and test_phi.py).
    phi_pause: float = 0.5
    ping_interval: float = 0.5
    down_after: float = 1.5
    hint_max_per_target: int = 10_000
    # Hints older than this stop waiting for their target and go to another home replica of the
    # key that is up (anti-entropy brings the target up to date). It must stay below
    # tombstone_grace: a hint delivered after its key's tombstone was reaped would resurrect.
    hint_max_age: float = 600.0
    # Anti-entropy: every interval, Merkle comparisons of every range shared with the next peer;
    # 0 turns it off.
    repair_interval: float = 2.0
    merkle_depth: int = 6
    tombstone_grace: float = 900.0
    # Range movement (join, decommission).
    join_delay: float = 2.0
    # A decommission that makes no progress this long (a stream target down, no replica up to take
    # its hints) stops: the node is normal again and the request fails, saying why.
    leave_stall: float = 60.0
    stream_batch: int = 100
    hint_delivery_interval: float = 0.5
    hint_batch: int = 64
    hinted_handoff: bool = True
    max_key_bytes: int = MAX_KEY_BYTES
    max_value_bytes: int = MAX_VALUE_BYTES
    sibling_warn: int = 25
    sibling_max: int = 100
    # A node forwarding a put mints its exact dot (core/roles/exact_dots.py); off in a node that
    # speaks an older wire protocol than 4 (its peers could not carry the dot).
    exact_dots: bool = True

    def detection_bound(self) -> float:
        """Seconds within which every live node has noticed a dead peer (a stated, tested bound)."""
        if self.liveness == "gossip":
            return 4.5 + 2 * (self.gossip_interval - 0.5) + 2 * (self.phi_pause - 0.5)
        return self.down_after + 2 * self.ping_interval

    # Test-only fault switches, used to prove the chaos checker catches real bugs.
    bugs: frozenset[str] = field(default_factory=frozenset)
