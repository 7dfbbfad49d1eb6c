"""Ring properties: one owner per key, distinct replicas, distinct zones when zones allow."""

from hypothesis import given
from hypothesis import strategies as st

from bhandar_cli.core.membership.ring import Ring, key_token, moved_keys

node_names = st.lists(st.sampled_from("ABCDEFGHIJKL"), min_size=1, max_size=10, unique=True)


@given(nodes=node_names, vnodes=st.integers(1, 16), token=st.integers(0, 2**32 - 1))
def test_every_key_has_exactly_one_owner(nodes: list[str], vnodes: int, token: int) -> None:
    ring = Ring.build(nodes, vnodes)
    owners = [rng.owner for rng in ring.ranges() if rng.contains(token)]
    assert owners == [ring.owner(token)]


@given(
    nodes=node_names,
    vnodes=st.integers(1, 16),
    n=st.integers(1, 5),
    zones=st.integers(1, 5),
    token=st.integers(0, 2**32 - 1),
)
def test_preference_list_distinct_nodes_and_zones(
    nodes: list[str], vnodes: int, n: int, zones: int, token: int
) -> None:
    zone_of = {node: f"z{i % zones + 1}" for i, node in enumerate(nodes)}
    ring = Ring.build(nodes, vnodes, zone_of)
    prefs = ring.preference_list(token, n)
    assert len(prefs) == min(n, len(nodes))
    assert len(set(prefs)) == len(prefs)
    assert prefs[0] == ring.owner(token)
    distinct_zones = len(set(zone_of.values()))
    if distinct_zones >= n:
        assert len({zone_of[p] for p in prefs}) == len(prefs)
    assert set(ring.fallbacks(token, n)).isdisjoint(prefs)
    assert len(ring.fallbacks(token, n)) + len(prefs) == len(nodes)


def test_ownership_sums_to_one_and_joining_moves_a_fifth() -> None:
    four = Ring.build("ABCD", 100)
    five = Ring.build("ABCDE", 100)
    assert abs(sum(four.ownership.values()) - 1.0) < 1e-9
    tokens = [key_token("ks", f"k{i}") for i in range(20000)]
    share = moved_keys(four, five, tokens) / len(tokens)
    # Everything that moves must move to the newcomer.
    assert all(five.owner(t) == "E" for t in tokens if four.owner(t) != five.owner(t))
    assert 0.10 < share < 0.30


def test_with_and_without_node_round_trip() -> None:
    four = Ring.build("ABCD", 8)
    five = Ring.build("ABCDE", 8)
    assert five.without_node("E").positions == four.positions
    assert four.with_node("E", five.tokens_by_node()["E"], "E").owners == five.owners
