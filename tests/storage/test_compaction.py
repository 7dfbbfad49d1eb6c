"""Size tiers, the k-way merge, the merge function and when deletion markers may go."""

from __future__ import annotations

from dataclasses import replace

from bhandar_cli.storage.compaction import Entry, TierPolicy, backlog, live_keys, merge_runs, pick, tiers
from bhandar_cli.storage.disk.sim_disk import SimDisk
from bhandar_cli.storage.engine import LSMEngine
from bhandar_cli.storage.record_kinds import DELETE, MERGE, VALUE

from .conftest import SMALL, small_engine, union

P = TierPolicy(min_tables=4, small_table_bytes=10)


def test_tiers_group_contiguous_tables_of_similar_size() -> None:
    sizes = [1000, 100, 110, 90, 100, 12, 11]
    assert tiers(sizes, P) == [range(0, 1), range(1, 5), range(5, 7)]
    assert pick(sizes, P) == range(1, 5)
    assert backlog(sizes, P) == 4
    assert pick([1000, 100, 100, 100], P) is None and backlog([1000, 100, 100, 100], P) == 0


def test_small_tables_share_a_tier_and_max_tables_caps_a_compaction() -> None:
    policy = TierPolicy(min_tables=2, max_tables=3, small_table_bytes=1000)
    sizes = [1, 900, 30, 500, 2]
    assert tiers(sizes, policy) == [range(0, 5)]
    assert pick(sizes, policy) == range(0, 3)


def test_the_smallest_due_tier_goes_first() -> None:
    sizes = [1000, 1000, 1000, 1000, 100, 100, 100, 100]
    assert pick(sizes, P) == range(4, 8)
    assert backlog(sizes, P) == 8


def test_merge_runs_newest_wins_and_keeps_or_drops_deletions() -> None:
    newest = [(b"a", DELETE, None), (b"c", VALUE, b"c2")]
    oldest = [(b"a", VALUE, b"a1"), (b"b", VALUE, b"b1"), (b"c", VALUE, b"c1")]
    keep = list(merge_runs([newest, oldest], None, drop_deletes=False))
    assert keep == [(b"a", DELETE, None), (b"b", VALUE, b"b1"), (b"c", VALUE, b"c2")]
    drop = list(merge_runs([newest, oldest], None, drop_deletes=True))
    assert drop == [(b"b", VALUE, b"b1"), (b"c", VALUE, b"c2")]


def test_merge_runs_folds_merge_operands_in_age_order() -> None:
    def merge(newer: bytes, older: bytes) -> bytes:
        return newer + b"|" + older  # associative, not commutative: order matters

    runs: list[list[Entry]] = [[(b"k", MERGE, b"3")], [(b"k", MERGE, b"2")], [(b"k", MERGE, b"1")]]
    assert list(merge_runs(runs, merge, drop_deletes=False)) == [(b"k", MERGE, b"3|2|1")]
    assert list(merge_runs(runs, merge, drop_deletes=True)) == [(b"k", VALUE, b"3|2|1")]
    over_delete: list[list[Entry]] = [[(b"k", MERGE, b"3")], [(b"k", DELETE, None)], [(b"k", MERGE, b"1")]]
    assert list(merge_runs(over_delete, merge, drop_deletes=False)) == [(b"k", VALUE, b"3")]


def test_compaction_with_a_merge_function_keeps_the_merged_value() -> None:
    disk = SimDisk()
    eng = LSMEngine(disk, "/m", replace(SMALL, auto_compact=False), merge=union)
    for token in (b"a", b"b", b"c", b"d"):
        eng.put(b"k", token)  # each sibling lands in its own table
        eng.put(b"other", token)
        eng.flush()
    assert len(eng.table_names) == 4
    assert eng.get(b"k") == b"a,b,c,d"  # reads fold across runs
    [report] = eng.compact()
    assert report.records_in == 8 and report.records_out == 2 and report.dropped_deletes
    assert len(eng.table_names) == 1
    assert eng.get(b"k") == b"a,b,c,d"  # nothing lost by compaction
    eng.close()
    assert LSMEngine(disk, "/m", SMALL, merge=union).get(b"k") == b"a,b,c,d"


def test_deletion_markers_survive_until_the_compaction_includes_the_oldest_table() -> None:
    disk = SimDisk()
    eng = small_engine(disk, auto_compact=False)
    eng.put(b"gone", b"v" * 400)  # the oldest table is big: a tier of its own
    eng.put(b"pad", b"p" * 400)
    eng.flush()
    eng.delete(b"gone")
    eng.flush()
    for i in range(2):
        eng.put(b"x%d" % i, b"x")
        eng.flush()
    [report] = eng.compact()  # the three small newer tables only
    assert not report.dropped_deletes
    assert eng.get(b"gone") is None  # the marker still shadows the old value
    [full] = eng.compact(full=True)
    assert full.dropped_deletes and full.records_out == 3  # pad, x0, x1: marker and value gone
    assert eng.get(b"gone") is None
    assert [k for k, _ in eng.scan()] == [b"pad", b"x0", b"x1"]


def test_live_keys_are_the_keys_a_full_merge_keeps() -> None:
    runs: list[list[Entry]] = [  # newest first
        [(b"a", DELETE, None), (b"b", MERGE, b"2"), (b"d", DELETE, None)],
        [(b"a", VALUE, b"1"), (b"b", DELETE, None), (b"c", MERGE, b"1")],
        [(b"c", DELETE, None), (b"d", VALUE, b"0"), (b"e", VALUE, b"0")],
    ]
    kept = [k for k, _, _ in merge_runs(runs, lambda new, old: new + old, drop_deletes=True)]
    assert kept == [b"b", b"c", b"e"]
    assert list(live_keys(runs)) == kept
    assert list(live_keys([])) == []
