"""Scale in the simulator: node names beyond Z, preference lists on a large ring, chaos above 26
nodes, and `bhandar sim scale` at small sizes (the 240-node figures are in docs/scale.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from random import Random

from pytest import MonkeyPatch

from bhandar_cli.core.membership.gossip import GossipLiveness
from bhandar_cli.core.membership.ring import Ring
from bhandar_cli.core.model.config import NEW_NODE_NAME
from bhandar_cli.core.protocol.messages import Effect
from bhandar_cli.host.topology import next_node_name, node_names, zone_map
from bhandar_cli.sim.chaos.chaos_options import ChaosOptions
from bhandar_cli.sim.chaos.chaos_run import run_chaos
from bhandar_cli.sim.sim_cluster import SimCluster


def test_node_names_beyond_z_round_trip() -> None:
    names = node_names(800)
    assert names[:3] == ["A", "B", "C"] and names[25:28] == ["Z", "AA", "AB"]
    assert names[51:53] == ["AZ", "BA"] and names[701:703] == ["ZZ", "AAA"]
    assert len(set(names)) == len(names)

    # Spreadsheet columns parse back to their index: the names are a bijection, in order.
    def index(name: str) -> int:
        value = 0
        for ch in name:
            value = value * 26 + ord(ch) - ord("A") + 1
        return value - 1

    assert [index(n) for n in names] == list(range(800))
    assert all(NEW_NODE_NAME.fullmatch(n) for n in names)  # the REPL and CLI accept every one
    assert next_node_name(names[:240]) == "IG"
    assert next_node_name([n for n in names[:240] if n != "AB"]) == "AB"


def _naive_preference_list(ring: Ring, token: int, n: int) -> tuple[str, ...]:
    """The ring's preference list as it was written before it walked lazily: whole walk first."""
    start = ring.index_of(token)
    walk: list[str] = []
    for j in range(len(ring.positions)):
        node = ring.owners[(start + j) % len(ring.positions)]
        if node not in walk:
            walk.append(node)
    chosen: list[str] = []
    zones: set[str] = set()
    for node in walk:
        if len(chosen) < n and ring.zones[node] not in zones:
            chosen.append(node)
            zones.add(ring.zones[node])
    for node in walk:
        if len(chosen) < n and node not in chosen:
            chosen.append(node)
    return tuple(chosen)


def test_preference_lists_on_a_240_node_ring_match_a_whole_walk() -> None:
    rng = Random(7)
    for nodes, zones, vnodes in ((240, 3, 8), (40, 2, 4), (30, 1, 16), (5, 3, 2)):
        names = node_names(nodes)
        ring = Ring.build(names, vnodes, zone_map(names, zones))
        for _ in range(100):
            token = rng.getrandbits(32)
            for n in (1, 3, 5):
                assert ring.preference_list(token, n) == _naive_preference_list(ring, token, n)
        assert len(ring.walk(0)) == nodes


def test_chaos_above_26_nodes_passes() -> None:
    report = run_chaos(ChaosOptions(seed=40, ops=150, nodes=40))
    assert report.ok, report.check.violations[:3]
    assert report.params.nodes == 40 and any(len(name) == 2 for name in report.movements.ring)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-P", "-m", "bhandar_cli", *args], capture_output=True, text=True, timeout=300
    )


def test_sim_scale_json_at_small_sizes() -> None:
    done = _cli("sim", "scale", "--nodes", "6,18", "--seed", "3", "-o", "json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["cmd"] == "sim scale" and [r["nodes"] for r in out["rows"]] == [6, 18]
    small, large = out["rows"]
    for row in out["rows"]:
        assert row["detect_p50_s"] > 0 and row["detect_p99_s"] >= row["detect_p50_s"]
        assert row["detected_by"] == row["nodes"] - 1
        assert row["membership_all_s"] >= row["membership_p50_s"] >= 0
        assert row["keys_held_per_node"] > 0 and row["repair_bytes_per_node_h"] > 0
        assert row["repair_age_s"] > 0 and row["hints_total"] > 0
        assert row["all_to_all_messages_per_node_s"] == (row["nodes"] - 1) / out["gossip_interval_s"]
    # Gossip messages per node stay flat; all-to-all grows with the cluster and passes it.
    assert large["gossip_messages_per_node_s"] < large["all_to_all_messages_per_node_s"]
    assert large["gossip_messages_per_node_s"] < 1.5 * small["gossip_messages_per_node_s"]
    assert large["all_to_all_messages_per_node_s"] > 3 * small["all_to_all_messages_per_node_s"]


def test_sim_scale_rejects_bad_sizes() -> None:
    done = _cli("sim", "scale", "--nodes", "24,x")
    assert done.returncode == 2 and "--nodes must be" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def _notes_of_a_troubled_cluster() -> list[tuple[float, str, str]]:
    c = SimCluster(seed=11, nodes=30, zones=3, vnodes=4)
    c.run_for(2.0)
    for victim in ("B", "AC", "Q"):
        c.kill(victim)
        c.run_for(3.0)
    c.model.cut("A", "C")
    c.run_for(4.0)
    c.model.restore("A", "C")
    for victim in ("B", "Q"):
        c.revive(victim)
    c.run_for(6.0)
    return [(round(t, 6), node, note.text) for t, node, note in c.notes]


def test_gossip_notes_from_touched_peers_equal_a_scan_of_every_peer(monkeypatch: MonkeyPatch) -> None:
    """`GossipLiveness._transitions` looks only at the peers a message touched until some peer's
    silence can make it down; forcing a scan of every peer each time must give the same notes."""
    incremental = _notes_of_a_troubled_cluster()
    assert sum("down" in text for _, _, text in incremental) >= 29 * 2  # the test sees transitions
    original = GossipLiveness._transitions

    def full_scan(self: GossipLiveness, now: float) -> list[Effect]:
        self._scanned_version = -1  # as if membership had changed: every peer is asked
        return original(self, now)

    monkeypatch.setattr(GossipLiveness, "_transitions", full_scan)
    assert _notes_of_a_troubled_cluster() == incremental


def test_repl_takes_node_names_beyond_z(tmp_path: Path) -> None:
    script = tmp_path / "s.txt"
    script.write_text('put kv k "v" via=AB\nkill AD\nget kv k via=AD\n')
    done = _cli("repl", "--nodes", "30", "--virtual-time", "--script", str(script))
    assert done.returncode == 1, done.stdout + done.stderr  # the last line fails: AD is down
    assert "OK put kv/k via" in done.stdout and "killed AD" in done.stdout
    assert "AD" in done.stderr or "AD" in done.stdout.splitlines()[-1]
    assert _cli("repl", "--nodes", "241").returncode == 2
