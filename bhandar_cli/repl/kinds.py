"""What a REPL argument or option value is: how a usage line shows it and what Tab offers for it.

The fixed sets of choices (consistency levels, keyspace policies, quorum modes, output formats) are
not spelled here: each comes from its one declaration in `core.model.config` or `client.exit_status`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from bhandar_cli.client import OutputFormat
from bhandar_cli.core.model import LEVELS, POLICIES, QUORUM_MODES

# Where the live candidates of a kind come from (the completer's snapshot of the cluster, or the
# command table itself).
Source = Literal["nodes", "keyspaces", "keys", "commands"]


@dataclass(frozen=True)
class Kind:
    name: str
    metavar: str  # how a usage line shows a value of this kind
    offers: tuple[str, ...] = ()  # fixed completion candidates
    source: Source | None = None  # live completion candidates, offered before `offers`

    def offering(self, *values: str) -> Kind:
        """The same kind with other suggestions (e.g. longer durations for a timeout)."""
        return replace(self, offers=values)


def keyword(*words: str) -> Kind:
    """A word from a fixed set, in any case (`Command.keyword` checks it), shown as `a|b`."""
    return Kind("keyword", "|".join(words), words)


def choices(name: str, values: tuple[str, ...]) -> Kind:
    """A value from a declared set that its own parser checks (with its own message), e.g. a level."""
    return Kind(name, "|".join(values), values)


KEYSPACE = Kind("keyspace", "KS", source="keyspaces")
NEW_KEYSPACE = Kind("new-keyspace", "NAME")
KEY = Kind("key", "KEY", source="keys")  # keys seen in the keyspace named by the first argument
VALUE = Kind("value", "VALUE")
INTEGER = Kind("integer", "N")
NODE = Kind("node", "NODE", source="nodes")
NEW_NODE = Kind("new-node", "NODE")
# Nodes in groups separated by `|` (taken as one or more words).
NODE_GROUPS = Kind("node-groups", "A B | C D E", ("|",), source="nodes")
ZONE = Kind("zone", "Z")
NAME = Kind("name", "NAME")
DIRECTORY = Kind("directory", "DIR")
MOMENT = Kind("moment", "TIME")
MILLISECONDS = Kind("milliseconds", "MS", ("0", "50", "200", "1000"))
DURATION = Kind("duration", "DURATION", ("1s", "2s", "3s", "500ms"))
CONTEXT = Kind("context", "CONTEXT|auto|none", ("auto", "none"))
PORT = Kind("port", "PORT", ("8700", "0"))
REPLICAS = Kind("replicas", "N", ("1", "2", "3", "5"))
TTL = Kind("ttl", "TTL", ("60s", "5m", "1h", "1d"))
REQUEST_ID = Kind("request-id", "REQUEST_ID")
COMMAND = Kind("command", "CMD", source="commands")
LEVEL = choices("level", LEVELS)
POLICY = choices("policy", POLICIES)
QUORUM_MODE = choices("quorum-mode", QUORUM_MODES)
OUTPUT_FORMAT = keyword(*(f.value for f in OutputFormat))
