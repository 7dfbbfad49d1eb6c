"""Keyspaces in the REPL: created with `keyspace create`, never by first use; an unknown keyspace is
a one-line error and the session goes on; bad names and one keyspace too many are refused."""

from __future__ import annotations

from typing import Any

import pytest

from bhandar_cli.core.model import keyspaces as keyspaces_module

Run = Any


def test_an_unknown_keyspace_is_a_one_line_error_and_the_session_goes_on(repl: Run) -> None:
    out = repl(
        [
            "put kvv k v",
            "get carts k",
            "delete kvs k",
            "incr counter c",
            "prefs kvv k",
            "clock carts k",
            "keyspace list",
            "put kv k v",
            "keyspace create carts",
            "put carts k v",
            "get carts k",
        ],
        nodes=3,
    )
    failed = out[:6]  # the data commands, and the views of a key's replicas
    assert [o["ok"] for o in out] == [False] * 6 + [True] * 5
    assert {o["code"] for o in failed} == {"unknown_keyspace"}
    assert all("\n" not in o["error"] and "Keyspaces: counters, kv." in o["error"] for o in failed)
    assert "did you mean kv?" in failed[0]["error"] and "did you mean kv?" in failed[2]["error"]
    assert "did you mean counters?" in failed[3]["error"]
    assert "did you mean" not in failed[1]["error"]
    assert "did you mean kv?" in failed[4]["error"]
    assert [k["name"] for k in out[6]["keyspaces"]] == ["counters", "kv"]  # nothing was created
    assert out[8] == {**out[8], "name": "carts", "policy": "siblings", "n": 3, "created": True}
    assert out[10]["values"] == ["v"]


def test_bad_names_are_refused_and_nothing_is_created(repl: Run) -> None:
    names = [".", "..", "A", "a" * 65, "a/b", "'a b'"]
    out = repl([*(f"keyspace create {n}" for n in names), "keyspace list", "keyspace create a_b-9"])
    assert [o["ok"] for o in out] == [False] * len(names) + [True, True]
    assert all("1 to 64 characters of a-z, 0-9, _ and -" in o["error"] for o in out[: len(names)])
    assert [k["name"] for k in out[len(names)]["keyspaces"]] == ["counters", "kv"]


def test_a_keyspace_defined_otherwise_conflicts_and_an_identical_one_is_fine(repl: Run) -> None:
    out = repl(
        ["keyspace create prices policy=lww", "keyspace create prices policy=lww", "keyspace create prices"]
    )
    assert (out[0]["created"], out[1]["created"]) == (True, False)
    assert out[2]["ok"] is False and out[2]["code"] == "conflict"
    assert "already exists with policy=lww" in out[2]["error"]


def test_the_number_of_keyspaces_is_bounded(repl: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    # The real bound (1,000) is reached in tests/core; here a small one shows how the REPL says it.
    bound = 12
    monkeypatch.setattr(keyspaces_module, "MAX_KEYSPACES", bound)
    room = bound - 2  # kv and counters are there from the start
    out = repl(
        [*(f"keyspace create k{i}" for i in range(room)), "keyspace create one-more", "put k0 a b"], nodes=3
    )
    assert all(o["ok"] for o in out[:room])
    refused = out[room]
    assert refused["ok"] is False and refused["code"] == "bad_input"
    assert f"has {bound} keyspaces, the most it allows" in refused["error"]
    assert out[-1]["ok"] is True
