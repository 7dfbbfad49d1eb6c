"""The data key of a process cluster: encryption at rest of every node's WAL and SSTables.

`cluster up` (unless `--no-encrypt`) and `cluster init` make one 256-bit key in DIR/keys/data.key
(base64, mode 0600 in a 0700 directory; made once, never replaced: there is no rotation) and
start every node with `--data-key-file` naming it. A node started by hand takes the file too, or
the key itself, base64, in $BHANDAR_DATA_KEY. The storage engine seals with it (storage/cipher.py)
and refuses a directory encrypted under another key, or without one (`DataKeyError`). Whoever
holds this file can read the data: keep it off the disks it protects when they leave the machine.
"""

from __future__ import annotations

import base64
import binascii
import os
import stat
from pathlib import Path

from bhandar_cli.core.model import Refused
from bhandar_cli.storage import KEY_BYTES, DataCipher

KEY_DIR = "keys"
KEY_FILE = "data.key"
ENV_VAR = "BHANDAR_DATA_KEY"


class DataKeyProblem(Refused):
    """The key given is missing, unreadable, too open or not a key (the operator's setup)."""


def key_path(cluster_dir: str | Path) -> Path:
    return Path(cluster_dir) / KEY_DIR / KEY_FILE


def ensure_key(cluster_dir: str | Path) -> Path:
    """DIR/keys/data.key, made (0600) if it does not exist yet; an existing key is kept."""
    path = key_path(cluster_dir)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path
    with os.fdopen(fd, "w", encoding="ascii") as out:
        out.write(base64.b64encode(os.urandom(KEY_BYTES)).decode("ascii") + "\n")
        out.flush()
        os.fsync(out.fileno())
    return path


def decode_key(text: str, where: str) -> bytes:
    try:
        key = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        key = b""
    if len(key) != KEY_BYTES:
        raise DataKeyProblem(f"{where} is not a data key (want {KEY_BYTES} bytes, base64)")
    return key


def read_key_file(path: str | Path) -> bytes:
    path = Path(path)
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataKeyProblem(f"cannot read the data key {path}: {exc}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise DataKeyProblem(f"data key {path} is readable by others: chmod 600 {path}")
    return decode_key(text, str(path))


def node_key(key_file: str) -> bytes | None:
    """The key a node was given: `--data-key-file`, else $BHANDAR_DATA_KEY, else None (plain)."""
    if key_file:
        return read_key_file(key_file)
    env = os.environ.get(ENV_VAR, "")
    return decode_key(env, f"${ENV_VAR}") if env else None


def cipher_for(key: bytes | None) -> DataCipher | None:
    """The storage cipher of `key` (nonces from the OS's random source); None: plain storage."""
    return None if key is None else DataCipher(key, os.urandom)
