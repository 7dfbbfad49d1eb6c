"""A node process's note log: a reader's cursor, a restart (new boot id), a reader left behind."""

from __future__ import annotations

from bhandar_cli.node.note_log import NoteLog


def test_a_reader_gets_what_came_after_its_cursor_and_everything_after_a_restart() -> None:
    log = NoteLog(capacity=4)
    log.append("B sees A down", {"node": "B", "peer": "A", "up": False})
    first = log.since(0, "")
    assert first["notes"] == [["B sees A down", {"node": "B", "peer": "A", "up": False}]]
    assert (first["next"], first["missed"]) == (1, 0)
    log.append("B sees A up", {"node": "B", "peer": "A", "up": True})
    assert [text for text, _ in log.since(first["next"], first["boot"])["notes"]] == ["B sees A up"]
    assert log.since(2, first["boot"])["notes"] == []  # nothing new
    restarted = NoteLog(capacity=4)
    restarted.append("C joined", {})
    # The old cursor (boot id of the log before the restart) does not skip the new log's notes.
    again = restarted.since(first["next"], first["boot"])
    assert again["boot"] != first["boot"] and [t for t, _ in again["notes"]] == ["C joined"]


def test_a_reader_left_behind_is_told_how_many_notes_it_missed() -> None:
    log = NoteLog(capacity=3)
    for i in range(7):
        log.append(f"note {i}", {})
    late = log.since(1, log.boot)
    assert [t for t, _ in late["notes"]] == ["note 4", "note 5", "note 6"]
    assert (late["missed"], late["next"]) == (3, 7)
