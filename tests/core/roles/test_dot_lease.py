"""The dot counter lease: a restart, even mid-lease and after a power cut, never reissues a dot; a
context above the lease is refused as forged; the per-key `dot:` records of older builds are
migrated away at boot, the lease starting above them."""

from __future__ import annotations

from pathlib import Path
from random import Random
from typing import Any

import pytest

from bhandar_cli.core.model.records import Versioned
from bhandar_cli.core.model.store import MemoryStore, Store
from bhandar_cli.core.model.versions import JSON
from bhandar_cli.core.protocol.client_messages import Failure, PutRequest, PutResult
from bhandar_cli.core.protocol.messages import DotLeaseSaved
from bhandar_cli.core.roles.dot_lease import LEASE, META, DotLease
from bhandar_cli.sim.chaos.storage_faults import LSMHosts
from bhandar_cli.sim.sim_cluster import SimCluster
from bhandar_cli.storage.disk.real_disk import RealDisk
from bhandar_cli.store.record_store import RecordStore


class PowerCutStore(MemoryStore):
    """Metadata that a crash takes back to what the last sync saved."""

    def __init__(self) -> None:
        super().__init__()
        self._synced: dict[str, Any] = {}

    def sync(self) -> None:
        super().sync()
        self._synced = dict(self._meta)

    def power_cut(self) -> None:
        self._meta = dict(self._synced)


@pytest.mark.parametrize("seed", range(20))
def test_no_counter_that_left_the_node_is_issued_again_after_a_power_cut(seed: int) -> None:
    """Counters leave the node at once when the lease allows it, else after the next sync (with the
    `DotLeaseSaved` effects taken before it); power cuts strike at random, mid-lease included."""
    rng = Random(seed)
    store = PowerCutStore()
    lease = DotLease.load(store, "A")
    left: set[int] = set()  # counters sent or acknowledged
    waiting: list[int] = []  # counters waiting for the next sync
    effects: list[DotLeaseSaved] = []
    cuts = 0
    for _ in range(6000):
        roll = rng.random()
        if roll < 0.9:
            counter = lease.next_counter(rng.choice([1, 1, 1, lease.issued // 2]))
            assert counter not in left
            saved = lease.take(counter)
            if saved is not None:
                effects.append(saved)
            (left.add if lease.may_send(counter) else waiting.append)(counter)
        elif roll < 0.99:
            store.sync()
            left.update(waiting)
            waiting.clear()
            for effect in effects:
                lease.on_saved(effect)
            effects.clear()
        else:
            store.power_cut()
            cuts += 1
            waiting.clear()
            effects.clear()
            lease = DotLease.load(store, "A")
            assert lease.next_counter(1) > max(left, default=0)
    assert cuts > 10 and len(left) > 3 * LEASE  # the run crossed many leases and crashes


def home_dots(c: SimCluster, actor: str) -> list[tuple[int, str]]:
    """Every dot of `actor` any replica holds, with its key."""
    found = []
    for host in c.hosts.values():
        for key, record in host.store.items("kv"):
            assert isinstance(record, Versioned)
            found += [(s.dot[1], key) for s in record.siblings if s.dot[0] == actor]
    return found


def test_a_node_that_loses_power_mid_lease_never_mints_a_dot_again() -> None:
    """Through the executor, on LSM storage with slow fsyncs: the power goes out after a burst of
    writes could have been sent but before their sync, mid-lease and right after a restart, when
    the first writes need a new mark (which the power cut loses). Each key is written once, so two
    keys holding the same dot of A would be a dot minted twice."""
    disks = LSMHosts(Random(7))
    c = SimCluster(
        seed=7,
        nodes=3,
        **disks.hooks(),
        sync_delay=lambda rng: rng.uniform(0.001, 0.01),
    )
    c.run_for(2.0)
    written = 0

    def burst(n: int) -> None:
        """`n` puts reaching A now, all handled in A's next step."""
        nonlocal written
        for _ in range(n):
            c.hosts["A"].submit(put(c, f"k{written}", "ONE"), lambda _result: None)
            written += 1

    def power_cut_after_a_burst() -> None:
        burst(10)
        c.run_for(0.0005)  # sent, if they were going to be sent before the sync: it takes longer
        c.kill("A")  # what A had not synced is gone
        c.run_for(0.5)
        c.revive("A")
        c.run_for(0.5)

    for _ in range(12):
        for _ in range(10):
            burst(10)
            c.run_for(0.004)
        power_cut_after_a_burst()  # mid-lease
        power_cut_after_a_burst()  # the first dots of a life, whose new mark is not saved yet
    c.run_for(5.0)
    by_dot: dict[int, set[str]] = {}
    for counter, key in home_dots(c, "A"):
        by_dot.setdefault(counter, set()).add(key)
    assert len(by_dot) > LEASE  # the run crossed leases
    assert {d: keys for d, keys in by_dot.items() if len(keys) > 1} == {}


def put(c: SimCluster, key: str, level: str, context: dict[str, int] | None = None) -> PutRequest:
    return PutRequest(c.new_rid(), "kv", key, b'"v"', JSON, context, level)


def test_a_context_above_the_lease_is_refused_as_forged() -> None:
    c = SimCluster(seed=3, nodes=3)
    c.run_for(2.0)
    for i in range(5):
        assert isinstance(c.call("A", put(c, f"k{i}", "ALL")), PutResult)
    issued = max(counter for counter, _ in home_dots(c, "A"))
    refused = c.call("A", put(c, "k0", "ALL", {"A": issued + 1}))
    assert isinstance(refused, Failure) and refused.code == "bad_input"
    assert "context from the future" in refused.error and f"A:{issued + 1}" in refused.error
    accepted = c.call("A", put(c, "k0", "ALL", {"A": issued}))
    assert isinstance(accepted, PutResult)


def memory_store(_tmp: Path) -> Store:
    return MemoryStore()


def record_store(tmp: Path) -> Store:
    return RecordStore(RealDisk(), str(tmp / "node"))


@pytest.mark.parametrize("make_store", [memory_store, record_store])
def test_boot_deletes_the_old_per_key_dot_records_and_the_lease_starts_above_them(
    make_store: Any, tmp_path: Path
) -> None:
    stores = {name: make_store(tmp_path / name) for name in "ABC"}
    old = {"dot:A:kv/k1": 57, "dot:A:kv/k2": 12, "dot:A~3:kv/k1": 9000, "dot:B:kv/k1": 4}
    for name, value in old.items():
        stores["A"].put_meta(name, value)
    stores["A"].put_meta("unrelated", 1)
    c = SimCluster(seed=4, nodes=3, store_factory=lambda name: stores[name])
    a = stores["A"]
    assert list(a.meta_names("dot:")) == [] and a.get_meta("unrelated") == 1
    # Above A's own records; A~3 is an older actor of this node, never written as again.
    assert a.get_meta(META) == ["A", 57]
    c.run_for(2.0)
    assert isinstance(c.call("A", put(c, "fresh", "ALL")), PutResult)
    assert [counter for counter, _ in home_dots(c, "A")] == [58] * 3
    if isinstance(a, RecordStore):  # and it stays so on disk
        a.reopen()
        assert list(a.meta_names("dot:")) == [] and a.get_meta(META)[1] > 57
