"""Opening a node's durable store in its data directory (the LSM engine on the real disk), which
nodes a directory of an in-process cluster holds, and where its snapshots go."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from bhandar_cli.core.errors import BadInput
from bhandar_cli.node.disk import RealDisk
from bhandar_cli.node.pki import TLS_DIR
from bhandar_cli.storage.engine import EngineOptions
from bhandar_cli.storage.record_store import RecordStore
from bhandar_cli.storage.recovery import restore_snapshot
from bhandar_cli.storage.wal import FsyncPolicy


def open_node_store(data_dir: str, fsync: str = "batch") -> RecordStore:
    """The store of one node in `data_dir` (created if missing); recovery runs on open."""
    disk = RealDisk()
    disk.makedirs(data_dir)
    return RecordStore(disk, data_dir, EngineOptions(fsync=FsyncPolicy(fsync)))


LEFT_SUFFIX = ".left"  # a node that left the ring: its directory renamed, its data kept


def stored_nodes(base: str) -> list[str]:
    """The nodes whose stores an in-process cluster's --data-dir holds (not those that left)."""
    if not os.path.isdir(base):
        return []
    return sorted(
        entry.name
        for entry in os.scandir(base)
        if entry.is_dir() and "." not in entry.name and os.path.exists(os.path.join(entry.path, "MANIFEST"))
    )


def node_set_mismatch(base: str, nodes: int, where: str, grow_hint: str) -> str | None:
    """Why starting `nodes` nodes (A, B, ...) on the data under `base` would be wrong, or None.

    The stored membership would keep nodes not started in the ring (owning ranges, collecting
    hints) with nobody running them, and a node the data does not know would start empty and own
    ranges it never received. `where` names the directory for the message; `grow_hint` says how
    nodes added later are started again."""
    from bhandar_cli.host.topology import node_names

    stored, wanted = stored_nodes(base), node_names(nodes)
    if not stored or stored == wanted:
        return None
    said = f"{where} holds the data of {len(stored)} nodes ({', '.join(stored)})"
    missing = [n for n in stored if n not in wanted]
    new = [n for n in wanted if n not in stored]
    if missing:
        said += f"; --nodes {nodes} would leave {', '.join(missing)} in the ring with nobody running them"
    if new:
        said += f"; --nodes {nodes} would start {', '.join(new)} with no data"
    if stored == node_names(len(stored)):
        return said + f": start it with --nodes {len(stored)}, or use another directory"
    return said + f": {grow_hint}, or use another directory"


def retire_node_dir(base: str, node: str) -> None:
    """Set aside the directory of a node that left the ring, so the next start does not count it
    as a member (stored_nodes): NODE.left, NODE.left2, ..."""
    source = os.path.join(base, node)
    if not os.path.isdir(source):
        return
    target, n = source + LEFT_SUFFIX, 1
    while os.path.exists(target):
        n += 1
        target = f"{source}{LEFT_SUFFIX}{n}"
    os.replace(source, target)


_SNAPSHOT_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")


def snapshot_path(root: Path, name: object, node: str) -> Path:
    """Where node `node` links the tables of snapshot `name`: ROOT/NAME/NODE. The name comes from
    a client: one that is not a plain name (a `/`, `..`, a leading dot) would make the node link
    its files outside its snapshot directory, so it is refused."""
    if not isinstance(name, str) or not _SNAPSHOT_NAME.fullmatch(name) or ".." in name:
        raise BadInput(
            f"bad snapshot name {name!r}: use 1-64 letters, digits, '_', '-' or '.', with no '..' "
            "and not starting with '.'"
        )
    return root / name / node


def restore_node_dir(snapshot_dir: str, data_dir: str, node: str) -> None:
    """Replace a stopped node's data directory by its snapshot (hard links), as a new actor.

    The restored node's own dot counters go back in time; writing under a new actor id
    (`Node.home_actor`) keeps it from reusing dots it handed out after the snapshot. The node's
    TLS identity (DATA_DIR/tls) is not data: it waits beside the directory and comes back.
    """
    old = open_node_store(data_dir)
    restores = int(old.get_meta("restores") or 0) + 1
    old.close()
    identity = Path(data_dir) / TLS_DIR
    kept = Path(data_dir).with_name(f".{Path(data_dir).name}.{TLS_DIR}")  # same file system
    if identity.is_dir():
        identity.rename(kept)
    shutil.rmtree(data_dir)
    os.makedirs(data_dir, mode=0o700)
    restore_snapshot(RealDisk(), snapshot_dir, data_dir)
    if kept.is_dir():
        kept.rename(identity)
    fresh = open_node_store(data_dir)
    fresh.put_meta("restores", restores)
    fresh.put_meta("actor", f"{node}~r{restores}")
    fresh.close()
