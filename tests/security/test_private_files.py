"""Secret files (keys, certificates, the auth file, join tokens, the cluster file) are written so
that nothing planted in their directory is written through, and are never readable by others,
not even for a moment.

An attacker who can create a file in the directory plants symbolic links where the secret will
go (its own name, and the fixed temporary names earlier versions used) pointing at a file of
theirs; after the write that file is untouched and the secret is a regular 0600 file.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from bhandar_cli.fleet import cluster_file
from bhandar_cli.fleet.cluster_file import ClusterFile, NodeEntry
from bhandar_cli.security import pki

SECRET = b"-----BEGIN PRIVATE KEY----- not for others"


def _plant(directory: Path, names: list[str]) -> Path:
    """Links named `names` in `directory`, all to one file of the attacker's; that file."""
    bait = directory.parent / "attacker-owned"
    bait.write_bytes(b"bait")
    for name in names:
        (directory / name).symlink_to(bait)
    return bait


def _write_key(directory: Path) -> Path:
    path = directory / "node.key"
    pki.write_private(path, SECRET)
    return path


def _write_cluster_file(directory: Path) -> Path:
    entry = NodeEntry("A", "z1", "127.0.0.1", 1, 2, str(directory / "data" / "A"), str(directory / "A.log"))
    cluster_file.save(ClusterFile(str(directory), (entry,), token="bht_0123456789ab_secret"))
    return cluster_file.path_of(directory)


WRITERS: dict[str, tuple[Callable[[Path], Path], list[str]]] = {
    # what writes, and the names an attacker would plant for it (target, old fixed temp names)
    "write_private": (_write_key, ["node.key", "node.key.tmp"]),
    "cluster file": (_write_cluster_file, ["cluster.json", f".cluster.json.{os.getpid()}.tmp"]),
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_planted_links_are_not_followed(tmp_path: Path, writer: str) -> None:
    write, names = WRITERS[writer]
    directory = tmp_path / "secrets"
    directory.mkdir()
    bait = _plant(directory, names)
    path = write(directory)
    assert bait.read_bytes() == b"bait"  # nothing reached the attacker's file
    assert not path.is_symlink() and stat.S_ISREG(os.lstat(path).st_mode)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert b"secret" in path.read_bytes() or path.read_bytes() == SECRET
    leftovers = sorted(p.name for p in directory.iterdir() if p.name not in names)
    assert leftovers == [], leftovers  # no temporary file stays behind


def test_the_mode_is_0600_before_the_first_byte_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever the umask, there is no moment at which others may open the file and read it."""
    modes: list[int] = []
    write = os.write

    def watching_write(fd: int, data: bytes | memoryview) -> int:
        modes.append(stat.S_IMODE(os.fstat(fd).st_mode))
        return write(fd, data)

    monkeypatch.setattr(os, "write", watching_write)
    old = os.umask(0)
    try:
        pki.write_private(tmp_path / "ca.key", SECRET)
    finally:
        os.umask(old)
    assert modes and set(modes) == {0o600}
    assert (tmp_path / "ca.key").read_bytes() == SECRET


def test_a_failed_write_leaves_the_old_file_and_no_temporary_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "join-tokens.json"
    pki.write_private(path, b"old")

    def full_disk(fd: int, data: bytes | memoryview) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", full_disk)
    with pytest.raises(OSError, match="No space"):
        pki.write_private(path, b"new")
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["join-tokens.json"]
