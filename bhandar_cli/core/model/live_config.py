"""The cluster configuration: the tunables a running node takes without a restart, versioned.

`LiveConfig` is one version of it: a number that only grows and the values set so far (keys not set
keep the node's defaults, `NodeConfig` in config.py and the storage engine's options). A change is
made by `changed` (one key, validated before anything changes: an unknown key or a bad value is one
`BadInput`), rolled out node by node by the client (client/procedures/config_rollout.py), and
applied by each node at runtime: `Node.reconfigure` (the core tunables, through `retune` here) and
its driver (`STORAGE_KEYS`: the engine's, node/reconfigure.py `tune_store`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from bhandar_cli.core.model.config import NodeConfig
from bhandar_cli.core.model.durations import seconds_of
from bhandar_cli.core.model.errors import BadInput


@dataclass(frozen=True, slots=True)
class Setting:
    """One settable key: its type, its bounds and what it tunes (shown by `config show`)."""

    kind: type
    low: float
    high: float
    about: str
    seconds: bool = False  # a time: also typed as a duration (500ms, 2s, 5m, 1h, 1d)

    def parse(self, key: str, raw: object) -> int | float | bool:
        """`raw` (text a person typed, or a value read back) as this key's type, in bounds."""
        text = str(raw).strip().lower()
        if self.kind is bool:
            if text in ("true", "on", "yes", "1"):
                return True
            if text in ("false", "off", "no", "0"):
                return False
            raise BadInput(f"config {key} takes on or off (got {raw!r})")
        try:
            value: int | float = int(text) if self.kind is int else float(text)
        except ValueError:
            duration = seconds_of(text) if self.seconds else None
            if duration is None:
                if self.seconds:
                    what = "seconds, or a duration such as 500ms, 2s or 5m"
                else:
                    what = "a whole number" if self.kind is int else "a number"
                raise BadInput(f"config {key} takes {what} (got {raw!r})") from None
            value = duration
        if not self.low <= value <= self.high:
            raise BadInput(f"config {key}={raw} out of range ({self.low:g} to {self.high:g})")
        return value


# The keys `config set` takes. Sizes are bytes, times seconds.
SETTINGS: dict[str, Setting] = {
    "request_timeout": Setting(float, 0.0001, 600, "seconds a coordinator waits for replicas", seconds=True),
    "phi_threshold": Setting(float, 0.01, 50, "suspicion at which a silent peer is marked down"),
    "phi_pause": Setting(float, 0, 60, "heartbeat pause tolerated before phi climbs (s)", seconds=True),
    "gossip_interval": Setting(float, 0.05, 10, "seconds between gossip rounds", seconds=True),
    "gossip_fanout": Setting(int, 1, 16, "peers each gossip round goes to"),
    "hinted_handoff": Setting(bool, 0, 1, "keep hints for down replicas"),
    "hint_max_per_target": Setting(int, 0, 10_000_000, "hints kept per down replica"),
    "hint_max_age": Setting(float, 1, 86_400, "seconds a hint waits for its target", seconds=True),
    "hint_delivery_interval": Setting(float, 0.01, 60, "seconds between hint deliveries", seconds=True),
    "hint_batch": Setting(int, 1, 100_000, "hints in one delivery"),
    "read_repair": Setting(bool, 0, 1, "repair stale replicas a read saw"),
    "repair_interval": Setting(float, 0, 3600, "seconds between anti-entropy turns (0: off)", seconds=True),
    "tombstone_grace": Setting(float, 1, 30 * 86_400, "seconds before a tombstone is reaped", seconds=True),
    "sibling_warn": Setting(int, 1, 10_000, "siblings of a key that warn"),
    "sibling_max": Setting(int, 1, 10_000, "siblings of a key kept at most"),
    "memtable_bytes": Setting(int, 64 << 10, 1 << 30, "memtable size that starts a flush"),
    "compaction_min_tables": Setting(int, 2, 64, "similar tables that start a compaction"),
    "compaction_max_tables": Setting(int, 2, 256, "tables one compaction merges at most"),
}
# Keys the node's driver applies to its storage engine (the core has no storage options).
STORAGE_KEYS = frozenset({"memtable_bytes", "compaction_min_tables", "compaction_max_tables"})


def parse_setting(key: str, raw: object) -> int | float | bool:
    setting = SETTINGS.get(key.strip().lower())
    if setting is None:
        raise BadInput(f"unknown config key {key!r} (keys: {', '.join(sorted(SETTINGS))})")
    return setting.parse(key, raw)


@dataclass(frozen=True, slots=True)
class LiveConfig:
    """One version of the cluster configuration: the values set (sorted by key) over the defaults."""

    version: int = 0
    values: tuple[tuple[str, int | float | bool], ...] = ()

    def get(self, key: str, default: Any = None) -> Any:
        return dict(self.values).get(key, default)

    def changed(self, key: str, raw: object) -> LiveConfig:
        """The next version, with `key` set to `raw` (BadInput if either is wrong, or the result
        breaks a rule between keys)."""
        name = key.strip().lower()
        values = {**dict(self.values), name: parse_setting(name, raw)}
        nxt = LiveConfig(self.version + 1, tuple(sorted(values.items())))
        nxt.apply(NodeConfig())  # the rules between keys, before anything changes
        return nxt

    def apply(self, base: NodeConfig) -> NodeConfig:
        """`base` with the core's values of this version."""
        core: dict[str, Any] = {k: v for k, v in self.values if k not in STORAGE_KEYS}
        config = replace(base, **core)
        if config.hint_max_age >= config.tombstone_grace:
            raise BadInput(
                f"hint_max_age ({config.hint_max_age:g} s) must stay below tombstone_grace "
                f"({config.tombstone_grace:g} s): a hint delivered after its tombstone was reaped "
                "would bring the value back"
            )
        if config.sibling_warn > config.sibling_max:
            raise BadInput(
                f"sibling_warn ({config.sibling_warn}) must not exceed sibling_max ({config.sibling_max})"
            )
        low, high = self.get("compaction_min_tables", 4), self.get("compaction_max_tables", 32)
        if low > high:
            raise BadInput(f"compaction_min_tables ({low}) must not exceed compaction_max_tables ({high})")
        return config

    def to_plain(self) -> dict[str, Any]:
        return {"version": self.version, "values": dict(self.values)}

    @classmethod
    def from_plain(cls, plain: object) -> LiveConfig:
        """A configuration as `to_plain` wrote it (from the wire or a file); BadInput if malformed."""
        if not isinstance(plain, Mapping) or not isinstance(plain.get("values", {}), Mapping):
            raise BadInput("a configuration is {'version': N, 'values': {key: value}}")
        version = plain.get("version", 0)
        if type(version) is not int or version < 0:
            raise BadInput(f"config version must be a whole number ≥ 0 (got {version!r})")
        values = {str(k): parse_setting(str(k), v) for k, v in plain.get("values", {}).items()}
        live = cls(version, tuple(sorted(values.items())))
        live.apply(NodeConfig())
        return live


def values_of(config: NodeConfig, live: LiveConfig) -> dict[str, Any]:
    """Every settable key's value on a node running `config` (storage keys: set or default)."""
    storage = {"memtable_bytes": 4 << 20, "compaction_min_tables": 4, "compaction_max_tables": 32}
    return {k: live.get(k, storage[k]) if k in STORAGE_KEYS else getattr(config, k) for k in SETTINGS}


def config_view(config: NodeConfig, live: LiveConfig) -> dict[str, Any]:
    """What a node shows of its configuration: its version, every key's value, the keys set."""
    return {"version": live.version, "values": values_of(config, live), "set": dict(live.values)}


def retune(config: NodeConfig, hints: Any, siblings: Any, *holders: Any, gossip: Any) -> None:
    """Point a node's parts at `config`: those that read it on each use (`holders`) and those
    that copied a value when they were built (hint queue bounds, sibling limit, gossip and its
    failure detectors)."""
    for part in holders:
        part.config = config
    hints.max_per_target = config.hint_max_per_target
    hints.max_age = config.hint_max_age
    siblings.limit = config.sibling_max
    if gossip is not None:
        gossip.interval = config.gossip_interval
        gossip.fanout = config.gossip_fanout
        gossip.retune_detectors(config.phi_threshold, config.phi_pause, config.gossip_interval)
