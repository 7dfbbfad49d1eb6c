"""What a node's log says of its last life: the words it stopped with (shown by status for a down
node), never those of an earlier life, and nothing for a node killed or asked to stop."""

from __future__ import annotations

from pathlib import Path

from bhandar_cli.fleet.node_logs import last_words, log_tail, with_last_words

DISK_FULL = "bhandar: node B failed to sync its store: its disk is full: No space left on device; free space"


def write(tmp_path: Path, *lines: str) -> str:
    log = tmp_path / "B.log"
    log.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return str(log)


def test_the_last_life_s_words_are_found_and_an_earlier_life_s_are_not(tmp_path: Path) -> None:
    stopped = write(tmp_path, "--- starting node B", "2026 bhandar.node INFO serving", DISK_FULL)
    assert last_words(stopped, "B") == DISK_FULL.removeprefix("bhandar: node B ")
    info = with_last_words({"id": "B", "up": False}, stopped)
    assert info["crashed"].startswith("failed to sync its store: its disk is full")  # "node B" said once
    # Started again since: that life has said nothing yet (running, or killed with SIGKILL).
    restarted = write(tmp_path, "--- starting node B", DISK_FULL, "--- starting node B", "2026 INFO serving")
    assert last_words(restarted, "B") is None
    assert with_last_words({"id": "B", "up": False}, restarted) == {"id": "B", "up": False}


def test_a_missing_or_empty_log_says_nothing(tmp_path: Path) -> None:
    assert last_words(str(tmp_path / "none.log"), "B") is None
    assert last_words(write(tmp_path), "B") is None
    assert log_tail(str(tmp_path / "none.log")) == "(no log)"
    assert log_tail(write(tmp_path, "a", "", "b")) == "a | b"
