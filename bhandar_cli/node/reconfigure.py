"""Applying a version of the cluster configuration to a running node, on the driver's side: the
core's tunables (`Node.reconfigure`) and the storage engine's (`tune_store`), and remembering it
for the node's next life. Both node processes (the `config` RPC) and the in-process cluster
(client/backends/in_process_backend.py) come through `apply_live`."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from bhandar_cli.core.model import LiveConfig, Store, Unavailable
from bhandar_cli.core.model import config_view as live_config_config_view
from bhandar_cli.host import NodeHost
from bhandar_cli.storage import EngineOptions, TierPolicy
from bhandar_cli.store import RecordStore


def tune_store(store: Store, live: LiveConfig) -> None:
    """The storage keys of `live` on the store's engine (their defaults where not set); an
    in-memory store has no engine and nothing to tune."""
    if not isinstance(store, RecordStore):
        return
    engine = store.engine
    engine_defaults, tier_defaults = EngineOptions(), TierPolicy()
    tiers = replace(
        engine.options.tiers,
        min_tables=live.get("compaction_min_tables", tier_defaults.min_tables),
        max_tables=live.get("compaction_max_tables", tier_defaults.max_tables),
    )
    memtable = live.get("memtable_bytes", engine_defaults.memtable_bytes)
    engine.options = replace(engine.options, memtable_bytes=memtable, tiers=tiers)


def config_view(host: NodeHost) -> dict[str, Any]:
    """{"version", "values", "set"}: what the node runs now (every settable key, those set)."""
    node = host.node
    if node is None:
        raise Unavailable(f"node {host.name} is down")
    return live_config_config_view(node.config, node.live_config)


def apply_live(host: NodeHost, plain: object) -> dict[str, Any]:
    """Apply a configuration (LiveConfig.to_plain form) to the node now; its next life starts
    with it too. BadInput (a malformed or bad value) or Unavailable (the node is down) before
    anything changes. Returns `config_view` after."""
    live = LiveConfig.from_plain(plain)
    node = host.node
    if node is None:
        raise Unavailable(f"node {host.name} is down: it cannot take configuration version {live.version}")
    node.reconfigure(live)
    tune_store(host.store, live)  # every storage key: one set before and now unset goes back
    host.boot = replace(host.boot, live=live)
    return config_view(host)
