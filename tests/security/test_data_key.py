"""The data key of a process cluster: made once 0600, read from a file or the environment, and
refused in one clear line when it is missing, too open or not a key."""

from __future__ import annotations

import base64
import stat
from pathlib import Path

import pytest

from bhandar_cli.security.data_key import ENV_VAR, DataKeyProblem, ensure_key, node_key, read_key_file


def test_the_key_is_made_once_owner_only_and_kept(tmp_path: Path) -> None:
    path = ensure_key(tmp_path)
    assert path == tmp_path / "keys" / "data.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    key = read_key_file(path)
    assert len(key) == 32
    assert ensure_key(tmp_path) == path and read_key_file(path) == key  # never replaced
    assert read_key_file(ensure_key(tmp_path / "other")) != key


def test_a_key_is_refused_when_missing_open_to_others_or_not_a_key(tmp_path: Path) -> None:
    with pytest.raises(DataKeyProblem, match="cannot read the data key"):
        read_key_file(tmp_path / "none.key")
    path = ensure_key(tmp_path)
    path.chmod(0o644)
    with pytest.raises(DataKeyProblem, match="readable by others"):
        read_key_file(path)
    path.chmod(0o600)
    path.write_text("c2hvcnQ=\n")  # base64 of 5 bytes
    with pytest.raises(DataKeyProblem, match="not a data key"):
        read_key_file(path)


def test_a_node_takes_the_file_else_the_environment_else_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert node_key("") is None
    env_key = bytes(range(32))
    monkeypatch.setenv(ENV_VAR, base64.b64encode(env_key).decode())
    assert node_key("") == env_key
    path = ensure_key(tmp_path)
    assert node_key(str(path)) == read_key_file(path) != env_key
    monkeypatch.setenv(ENV_VAR, "not base64!")
    with pytest.raises(DataKeyProblem, match=f"\\${ENV_VAR} is not a data key"):
        node_key("")
