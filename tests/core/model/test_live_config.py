"""The cluster configuration in the core: validating a change (core/model/live_config.py) and a Node
taking one at runtime (`Node.reconfigure`), with nothing changed when it is refused."""

from __future__ import annotations

from random import Random

import pytest

from bhandar_cli.core.membership.phi import PhiConfig, PhiDetectors
from bhandar_cli.core.membership.ring import Ring
from bhandar_cli.core.model.config import NodeConfig
from bhandar_cli.core.model.errors import BadInput
from bhandar_cli.core.model.live_config import SETTINGS, LiveConfig
from bhandar_cli.core.model.store import MemoryStore
from bhandar_cli.core.node import Node
from bhandar_cli.core.protocol.client_messages import Failure, GetRequest
from bhandar_cli.core.protocol.messages import Respond

CONFIG = NodeConfig(liveness="ping", repair_interval=0)


def node_a() -> Node:
    ring = Ring.build(["A", "B", "C"], 8, {"A": "z1", "B": "z2", "C": "z3"})
    return Node("A", ring, MemoryStore(), Random(1), 0.0, CONFIG)


def timeouts_by(node: Node, until: float) -> int:
    """Reads through `node` whose peers never answer: how many failed by `until` (s)."""
    node.request(0.0, GetRequest(7, "kv", "k", "QUORUM"))  # its Sends are lost: no peer answers
    failed, now = 0, 0.0
    while now <= until:
        for effect in node.tick(now):
            if isinstance(effect, Respond) and isinstance(effect.result, Failure):
                failed += 1
        now = round(now + 0.05, 3)
    return failed


def test_a_change_is_the_next_version_and_validated_before_anything_changes() -> None:
    v0 = LiveConfig()
    v1 = v0.changed("phi_threshold", "10")
    v2 = v1.changed("Hinted_Handoff", "off")
    assert (v1.version, v2.version) == (1, 2)
    assert v2.get("phi_threshold") == 10.0 and v2.get("hinted_handoff") is False
    assert LiveConfig.from_plain(v2.to_plain()) == v2
    refused = {
        ("nope", "1"): "unknown config key",
        ("phi_threshold", "abc"): "takes a number",
        ("gossip_fanout", "1.5"): "whole number",
        ("phi_threshold", "0"): "out of range",
        ("read_repair", "maybe"): "on or off",
        ("hint_max_age", "900"): "must stay below tombstone_grace",  # a reaped tombstone's hint
        ("compaction_min_tables", "40"): "must not exceed compaction_max_tables",
    }
    for (key, value), why in refused.items():
        with pytest.raises(BadInput, match=why):
            v1.changed(key, value)
    assert "request_timeout" in SETTINGS and "memtable_bytes" in SETTINGS


def test_a_time_takes_seconds_or_a_duration() -> None:
    v0 = LiveConfig()
    typed = {
        ("request_timeout", "1500ms"): 1.5,
        ("request_timeout", "2"): 2.0,
        ("gossip_interval", "2s"): 2.0,
        ("hint_max_age", "5m"): 300.0,
        ("tombstone_grace", "1d"): 86_400.0,
    }
    for (key, text), seconds in typed.items():
        assert v0.changed(key, text).get(key) == seconds, (key, text)
    refused = {
        ("request_timeout", "2x"): "takes seconds, or a duration such as 500ms, 2s or 5m",
        ("request_timeout", "1h"): "out of range",
        ("hint_batch", "5s"): "whole number",  # a count is not a time
        ("phi_threshold", "2s"): "takes a number",
    }
    for (key, value), why in refused.items():
        with pytest.raises(BadInput, match=why):
            v0.changed(key, value)


def test_a_node_takes_a_new_request_timeout_at_runtime() -> None:
    assert timeouts_by(node_a(), 0.5) == 0  # the default: one second
    node = node_a()
    config = node.reconfigure(LiveConfig(3, (("request_timeout", 0.25),)))
    assert config.request_timeout == 0.25 and node.config is config
    assert timeouts_by(node, 0.5) == 1
    shown = node.info(0.0, counts=False)["config"]
    assert shown["version"] == 3 and shown["set"] == {"request_timeout": 0.25}
    assert shown["values"]["request_timeout"] == 0.25 and shown["values"]["phi_threshold"] == 8.0
    node.reconfigure(LiveConfig(2, ()))  # a rollback: back to the defaults
    assert node.config.request_timeout == 1.0 and node.info(0.0)["config"]["version"] == 2


def test_a_refused_configuration_changes_nothing() -> None:
    node = node_a()
    node.reconfigure(LiveConfig(1, (("hint_max_per_target", 5),)))
    with pytest.raises(BadInput):
        node.reconfigure(LiveConfig(2, (("tombstone_grace", 10.0), ("hint_max_age", 20.0))))
    assert node.live_config.version == 1 and node.config.hint_max_per_target == 5
    assert node.config.tombstone_grace == CONFIG.tombstone_grace


def test_a_retuned_detector_judges_a_silent_peer_by_the_new_threshold() -> None:
    detectors = PhiDetectors(
        PhiConfig(threshold=8.0, acceptable_heartbeat_pause=0.5, first_heartbeat_estimate=1.0)
    )
    for t in range(20):
        detectors.heartbeat("B", float(t))
    assert detectors.is_up("B", 20.2)  # 1.2 s of silence after steady 1 s heartbeats: fine at 8
    detectors.retune(0.05, 0.0, 1.0)
    assert not detectors.is_up("B", 20.2)  # a threshold this low calls it down: peers would flap
    detectors.retune(8.0, 0.5, 1.0)
    assert detectors.is_up("B", 20.2)


def test_a_gossiping_node_retunes_its_detectors_and_hint_bounds() -> None:
    ring = Ring.build(["A", "B"], 8, {"A": "z1", "B": "z2"})
    node = Node("A", ring, MemoryStore(), Random(1), 0.0)
    node.reconfigure(
        LiveConfig(1, (("phi_threshold", 0.5), ("gossip_interval", 0.2), ("hint_max_age", 30.0)))
    )
    assert node.info(0.0)["config"]["values"]["gossip_interval"] == 0.2
    assert node.config.phi_threshold == 0.5 and node.config.hint_max_age == 30.0
