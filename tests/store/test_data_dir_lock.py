"""A data directory belongs to one process at a time: a store holds DIR/LOCK from open to close
(across a reopen), and a second opener is refused with who holds it; the kernel drops the lock
with its holder, so a killed node leaves none behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio
import trio.testing

from bhandar_cli.client.openers import ClusterOptions
from bhandar_cli.repl.batch import open_session
from bhandar_cli.store import data_dir_lock
from bhandar_cli.store.data_dir import DataDirInUse, open_node_store
from bhandar_cli.store.data_dir_lock import DirectoryLocked, lock_data_dir


def test_a_second_opener_is_refused_until_the_store_is_closed(tmp_path: Path) -> None:
    data = str(tmp_path / "A")
    store = open_node_store(data)
    with pytest.raises(DirectoryLocked, match=f"{data} is in use by process {os.getpid()}"):
        lock_data_dir(data, wait=0)
    store.reopen()  # a restart in place keeps the directory its own
    with pytest.raises(DirectoryLocked):
        lock_data_dir(data, wait=0)
    store.close()
    lock_data_dir(data, wait=0)()  # free again


def test_a_refused_open_is_a_clear_unavailable_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "A"
    data.mkdir()
    release = lock_data_dir(str(data))
    monkeypatch.setattr(data_dir_lock, "WAIT_S", 0.1)  # not the moment a dying holder is given
    with pytest.raises(DataDirInUse) as refused:
        open_node_store(str(data))
    assert refused.value.code == "unavailable" and "is that node already running?" in str(refused.value)
    release()


def test_a_killed_holder_leaves_no_lock_behind(tmp_path: Path) -> None:
    data = tmp_path / "A"
    data.mkdir()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from bhandar_cli.store.data_dir_lock import lock_data_dir; "
            f"lock_data_dir({str(data)!r}); print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        with pytest.raises(DirectoryLocked, match=f"process {holder.pid}"):
            lock_data_dir(str(data), wait=0)
    finally:
        holder.kill()
        holder.wait(timeout=30)
    lock_data_dir(str(data), wait=0)()  # SIGKILL released it


def test_a_second_repl_on_the_same_data_dir_is_refused_and_the_first_frees_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(data_dir_lock, "WAIT_S", 0.1)
    options = ClusterOptions(nodes=3, data_dir=str(tmp_path))

    async def main() -> None:
        async with open_session(options, "json") as first:
            await first.run_line("put kv k 1")
            with pytest.raises(DataDirInUse, match="is that node already running"):
                async with open_session(options, "json"):
                    pass
            await first.run_line("restore nosuch")  # a refused restore leaves every store as it was
        async with open_session(options, "json") as again:  # every lock was let go at the end
            (got,) = await again.run_line("get kv k c=ALL")
            assert got.to_json()["values"] == [1]

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
