"""What `bhandar check` offers, by name, for the command line to list without importing it: the
workloads (each with its one line of help), the kinds of fault and the checklist's scenarios.
The workloads' modules (check/workloads/) and the nemesis (check/nemesis.py) take their names
from here."""

from __future__ import annotations

WORKLOADS: dict[str, str] = {
    "echo": "echo_ok must carry back the payload sent",
    "unique-ids": "every generate_ok id must be new",
    "broadcast": "every acknowledged broadcast in every final read",
    "g-set": "every acknowledged add in every final read",
    "g-counter": "final reads equal the acknowledged sum (within indefinite adds)",
    "pn-counter": "as g-counter, with negative deltas",
    "lin-kv": "read/write/cas, linearizable per key",
    "dynamo-kv": (
        "put with context, get returning siblings: nothing acknowledged lost, siblings only if concurrent"
    ),
    "kafka": "send/poll/commit_offsets on append-only logs: nothing acknowledged lost, offsets in order",
    "txn-rw-register": "transactions of reads and writes: no anomaly the consistency models prohibit",
    "txn-list-append": "transactions of reads and list appends: no anomaly the consistency models prohibit",
}

KINDS = ("partition", "kill", "pause", "slow", "loss", "duplicate")

# The checklist's plans (check/nemesis.py `scenario`), named as dynamo-kv's checklist names them.
SCENARIOS = (
    "no fault",
    "one node down",
    "two nodes down",
    "minority partition",
    "slow replica",
    "hint holder killed",
    "restarts",
)

# Each workload's checklist: the plans that make sense for it, in its own words (name -> plan). A
# workload not listed gets GENERAL. `--scenario` takes the workload's names.
GENERAL = {
    "no fault": "no fault",
    "one node down": "one node down",
    "two nodes down": "two nodes down",
    "minority partition": "minority partition",
    "slow node": "slow replica",
    "node killed during a partition": "hint holder killed",
    "restarts": "restarts",
}
WORKLOAD_SCENARIOS: dict[str, dict[str, str]] = {
    # Each echo is answered by the node asked: only a node's own troubles matter.
    "echo": {name: GENERAL[name] for name in ("no fault", "one node down", "slow node", "restarts")},
    # Ids must stay unique across a partition and a restart (a node must not hand out one again).
    "unique-ids": {
        name: GENERAL[name] for name in ("no fault", "one node down", "minority partition", "restarts")
    },
    "dynamo-kv": {name: name for name in SCENARIOS},
}


def scenarios(workload: str) -> dict[str, str]:
    """The workload's checklist: its scenario names, in order, each with the plan it runs."""
    return WORKLOAD_SCENARIOS.get(workload, GENERAL)


# What `--consistency-models` takes (txn-rw-register, txn-list-append), weakest first; the
# anomalies each prohibits are check/elle.py's.
CONSISTENCY_MODELS = (
    "read-uncommitted",
    "read-committed",
    "read-atomic",
    "repeatable-read",
    "snapshot-isolation",
    "serializable",
    "strict-serializable",
)
DEFAULT_CONSISTENCY_MODELS = ("strict-serializable",)  # Maelstrom's default
