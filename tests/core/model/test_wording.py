"""Counts in messages agree with their nouns."""

from bhandar_cli.core.model.wording import count


def test_counts_take_the_right_number() -> None:
    assert [count(n, "ack") for n in (0, 1, 2)] == ["0 acks", "1 ack", "2 acks"]
    assert count(1, "reply", "replies") == "1 reply" and count(3, "reply", "replies") == "3 replies"
