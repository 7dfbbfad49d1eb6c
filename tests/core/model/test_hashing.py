"""The seed's hash and PRNG, checked against values printed by node (see each comment)."""

from bhandar_cli.core.model.hashing import Mulberry32, hash32, hash32_codepoints


def test_mulberry32_matches_javascript() -> None:
    # node -e 'mulberry32(61)' three calls (the function is copied from seed/sims/part1-ring.js)
    r = Mulberry32(61)
    assert [r(), r(), r()] == [0.5481709195300937, 0.7082904607523233, 0.8807682909537107]


def test_hash_matches_javascript() -> None:
    # node: ["", "A:0", "user:123", "ভান্ডার", "😀x"].map(hash) with part1-ring.js's hash
    assert [hash32(s) for s in ["", "A:0", "user:123", "ভান্ডার", "😀x"]] == [
        2872998923,
        292547480,
        1888004547,
        423275046,
        4022041948,
    ]


def test_codepoint_variant_differs_only_for_astral_characters() -> None:
    assert hash32_codepoints("k17") == hash32("k17")
    assert hash32_codepoints("ভান্ডার") == hash32("ভান্ডার")
    assert hash32_codepoints("😀x") != hash32("😀x")
