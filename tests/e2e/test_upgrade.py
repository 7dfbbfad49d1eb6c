"""A rolling upgrade from wire protocol 1 to this build's (4) of a 5-process cluster under QUORUM
writes: the oldest and the newest version side by side.

Two streams of blind QUORUM puts and one of read-modify-write puts (each reads its key and writes
with the context it got) run for the whole upgrade. Nothing may fail, every acknowledged put must
read back, a key written over with a context must hold the last write alone (a put forwarded by a
new node to an old one is stored under the old one's dot, and the new node voids the exact dot it
minted), no preference list may ever have two replicas down (sampled while it runs), and the nodes
must have exchanged writes, hints and repair across versions (the nodes' per-protocol message
counters, sampled too since a restart resets them).
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import trio

from bhandar_cli.client.openers import open_tcp_client
from bhandar_cli.core.model.values import encode_json
from bhandar_cli.core.node_views import NodeInfo
from bhandar_cli.fleet import cluster_file
from bhandar_cli.fleet.cluster_file import ClusterFile
from bhandar_cli.node.net.wire_versions import PROTOCOL_VERSION

NEW = PROTOCOL_VERSION

REPLICAS = 3


def preference_lists(ring: Any) -> list[set[str]]:
    return [set(ring.preference_list(r.hi, REPLICAS)) for r in ring.ranges()]


def test_upgrade_from_1_to_4_under_quorum_writes_fails_nothing(
    fresh_cluster_v1: ClusterFile,
) -> None:
    cluster = fresh_cluster_v1
    acked: dict[str, str] = {}
    last_over: dict[str, str] = {}  # a key written over and over with a context -> its last write
    failures: list[str] = []
    worst_down: list[set[str]] = []  # down sets that hit one preference list twice
    samples = 0
    counters: dict[tuple[str, int], NodeInfo] = {}  # (node, pid) -> its last info
    events: list[dict[str, Any]] = []

    async def main() -> dict[str, Any]:
        nonlocal samples
        async with open_tcp_client(cluster.dir) as writer, open_tcp_client(cluster.dir) as operator:
            backend = operator.backend
            lists = preference_lists(backend.ring)
            done = trio.Event()
            t0 = time.monotonic()

            def heard(event: dict[str, Any]) -> None:
                events.append({**event, "at": round(time.monotonic() - t0, 2)})

            async def write_stream(stream: int) -> None:
                i = 0
                while not done.is_set():
                    key, value = f"u{stream}-{i}", f"v{stream}-{i}"
                    try:
                        await writer.data.put(
                            "kv", key, encode_json(value), "application/json", "none", "QUORUM"
                        )
                        acked[key] = value
                    except Exception as exc:  # every failure counts, whatever its kind
                        failures.append(f"{key} at {time.monotonic() - t0:.2f}s: {exc}")
                    i += 1
                    await trio.sleep(0.02)

            async def overwrite_stream() -> None:
                # Read, then write with the context the read gave: each put replaces the last.
                i = 0
                while not done.is_set():
                    key, value = f"w{i % 5}", f"o{i}"
                    try:
                        if i >= 5:  # the session remembers the context of its last get of the key
                            await writer.data.get("kv", key, "QUORUM")
                        await writer.data.put(
                            "kv", key, encode_json(value), "application/json", "auto", "QUORUM"
                        )
                        last_over[key] = value
                    except Exception as exc:
                        failures.append(f"overwrite {key} at {time.monotonic() - t0:.2f}s: {exc}")
                    i += 1
                    await trio.sleep(0.02)

            async def read_stream() -> None:
                # QUORUM reads of what was written: replicas that missed a write are read-repaired.
                i = 0
                while not done.is_set():
                    if acked:
                        keys = list(acked)
                        key = keys[(i * 7919) % len(keys)]
                        try:
                            await writer.data.get("kv", key, "QUORUM")
                        except Exception as exc:
                            failures.append(f"read {key} at {time.monotonic() - t0:.2f}s: {exc}")
                    i += 1
                    await trio.sleep(0.02)

            async def sample() -> None:
                nonlocal samples
                while not done.is_set():
                    down = {n for n in backend.names if not backend.is_alive(n)}
                    samples += 1
                    if any(len(down & pl) >= 2 for pl in lists):
                        worst_down.append(down)
                    for name in backend.names:
                        if backend.is_alive(name):
                            info = await backend.node_info(name, counts=False)
                            if "by_protocol" in info:
                                counters[(name, int(info["pid"]))] = info
                    await trio.sleep(0.1)

            async def writes_acked(more: int) -> None:
                target = len(acked) + more
                with trio.fail_after(60):
                    while len(acked) < target:
                        await trio.sleep(0.02)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(write_stream, 0)
                nursery.start_soon(write_stream, 1)
                nursery.start_soon(overwrite_stream)
                nursery.start_soon(read_stream)
                nursery.start_soon(sample)
                await writes_acked(20)  # writes flowing before the first node stops
                report: dict[str, Any] = await operator.admin.upgrade(NEW, heard)
                await writes_acked(10)  # and after the last node is back
                done.set()
            missing = []
            for key, value in acked.items():
                got = await writer.data.get("kv", key, "QUORUM")
                if value not in got.values:
                    missing.append(key)
            report["missing"] = missing
            report["overwritten"] = {
                key: sorted((await writer.data.get("kv", key, "QUORUM")).values) for key in last_over
            }
            report["after"] = {n: await backend.node_info(n, counts=False) for n in backend.names}
            return report

    started = time.monotonic()
    report = trio.run(main)
    took = time.monotonic() - started

    assert failures == [], (
        f"{len(failures)} of {len(acked) + len(failures)} writes failed: {failures[:5]}; {events}"
    )
    assert len(acked) >= 50, f"only {len(acked)} writes during the upgrade"
    assert report["missing"] == [], f"acknowledged writes lost: {report['missing'][:5]}"
    assert len(last_over) == 5 and report["overwritten"] == {
        key: [value] for key, value in last_over.items()
    }, (report["overwritten"], last_over)
    assert samples >= 20 and worst_down == [], f"two replicas down together: {worst_down[:3]}"
    assert [r["node"] for r in report["nodes"]] == cluster.names
    assert all(r["settled"] and r["from"] == 1 and r["protocol"] == NEW for r in report["nodes"]), report
    # Drained, not killed: by the shutdown RPC, or by SIGTERM (the node drains on it too) when the
    # RPC did not get through on a loaded machine.
    assert all(r["stopped"] in ("stopped", "terminated") for r in report["nodes"]), report
    assert {info["protocol"] for info in report["after"].values()} == {NEW}
    assert {n.protocol for n in cluster_file.load(cluster.dir).nodes} == {NEW}
    phases = [e["phase"] for e in events if e["node"] == "C"]
    assert phases[:3] == ["check", "flush", "stop"] and phases[-1] == "done", phases

    # Across versions: what the new nodes sent to and got from version-1 peers, in version 1.
    mixed: Counter[str] = Counter()
    new: Counter[str] = Counter()
    for info in counters.values():
        if info["protocol"] != NEW:
            continue
        for direction in ("sent", "received"):
            mixed.update(info["by_protocol"][direction].get("v1", {}))
            new.update(info["by_protocol"][direction].get(f"v{NEW}", {}))
    writes = mixed["ReplicaWrite:write"] + mixed["ReplicaAck"]
    hints = mixed["ReplicaWrite:handoff"]
    repair = sum(c for m, c in mixed.items() if m.startswith("Repair") or m == "ReplicaWrite:repair")
    assert writes > 0 and hints > 0 and repair > 0, dict(mixed)
    assert new["ReplicaWrite:write"] > 0 and new["GossipSyn"] > 0, dict(new)
    per_node = [r["seconds"] for r in report["nodes"]]
    print(
        f"\nupgrade 1 -> {NEW}: {len(acked)} writes acknowledged, {len(failures)} failed, "
        f"{samples} samples; seconds per node {per_node}; total {report['seconds']:.1f} s "
        f"(test {took:.1f} s); across versions: writes {writes}, hints {hints}, repair {repair}"
    )
