"""Both Disk implementations keep the same contract; the simulated one crashes as documented."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from bhandar_cli.storage.disk.interface import Disk, write_file_atomically
from bhandar_cli.storage.disk.real_disk import RealDisk
from bhandar_cli.storage.disk.sim_disk import SimDisk


@pytest.fixture(params=["sim", "real"])
def disk_and_root(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Disk, str]:
    return (SimDisk(), "/root") if request.param == "sim" else (RealDisk(), str(tmp_path / "root"))


def test_contract(disk_and_root: tuple[Disk, str]) -> None:
    disk, root = disk_and_root
    assert isinstance(disk, Disk)
    disk.makedirs(f"{root}/a/b")
    f = disk.open_append(f"{root}/a/b/f")
    f.write(b"hello ")
    f.write(b"world")
    assert f.size == 11
    f.sync()
    f.close()
    assert disk.read(f"{root}/a/b/f") == b"hello world"
    assert disk.read(f"{root}/a/b/f", 6, 3) == b"wor"
    r = disk.open_read(f"{root}/a/b/f")
    assert r.pread(0, 5) == b"hello" and r.size == 11
    disk.link(f"{root}/a/b/f", f"{root}/a/g")
    disk.remove(f"{root}/a/b/f")
    assert r.pread(6, 5) == b"world"  # still readable through the open handle
    r.close()
    assert disk.listdir(f"{root}/a") == ["b", "g"] and disk.listdir(f"{root}/nope") == []
    write_file_atomically(disk, f"{root}/a/m", b"one")
    write_file_atomically(disk, f"{root}/a/m", b"two")
    assert disk.read(f"{root}/a/m") == b"two" and not disk.exists(f"{root}/a/m.tmp")
    disk.rename(f"{root}/a/g", f"{root}/a/h")
    disk.truncate(f"{root}/a/h", 5)
    assert disk.size(f"{root}/a/h") == 5 and not disk.exists(f"{root}/a/g")
    assert disk.fsync_count > 0 and disk.bytes_written >= 11


def test_sim_crash_loses_unsynced_bytes_and_can_tear_them() -> None:
    disk = SimDisk()
    disk.makedirs("/d")
    f = disk.open_append("/d/f")
    f.write(b"durable")
    f.sync()
    f.write(b"-lost-or-torn")
    disk.crash(torn=False)
    assert disk.read("/d/f") == b"durable"
    with pytest.raises(RuntimeError, match="before a simulated crash"):
        f.write(b"x")  # the dead process's handle
    g = disk.open_append("/d/f")
    g.write(b"0123456789")
    kept = disk.crash(random.Random(2))
    assert disk.read("/d/f") == b"durable" + b"0123456789"[: kept.get("/d/f", 0)]
    assert disk.crashes == 2 and disk.unsynced_bytes() == 0


def test_sim_crash_point_interrupts_the_chosen_operation() -> None:
    from bhandar_cli.storage.disk.sim_disk import SimulatedCrash

    disk = SimDisk()
    disk.makedirs("/d")
    f = disk.open_append("/d/f")
    disk.crash_at = disk.ops + 2
    f.write(b"a")
    with pytest.raises(SimulatedCrash, match="during fsync"):
        f.sync()
    disk.crash(torn=False)
    assert disk.read("/d/f") == b""


def test_flip_bit_is_reversible() -> None:
    disk = SimDisk()
    disk.makedirs("/d")
    f = disk.open_append("/d/f")
    f.write(b"\x00\x00")
    bit = disk.flip_bit("/d/f", rng=random.Random(1))
    assert disk.read("/d/f") != b"\x00\x00"
    disk.flip_bit("/d/f", bit)
    assert disk.read("/d/f") == b"\x00\x00"
