"""Each rule a person's input meets is declared once: the node name a person gives a new node (a
documented refinement of the node id), the duration units (a ttl is shown in them), and the exit
codes; their errors stay one clear line."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from bhandar_cli.cli import chaos_swarm_view
from bhandar_cli.client import exit_status
from bhandar_cli.client.openers import ClusterOptions, open_in_process_client
from bhandar_cli.core.model.config import NEW_NODE_NAME, NODE_ID, parse_ttl, show_ttl
from bhandar_cli.core.model.durations import UNITS, seconds_of
from bhandar_cli.core.model.errors import BadInput
from bhandar_cli.teach import demo_runner


@pytest.mark.parametrize("name", ["A", "F", "Node_7", "Z-2", "Abcdefghijklmnop"])
def test_a_new_node_name_is_a_node_id(name: str) -> None:
    assert NEW_NODE_NAME.fullmatch(name) and NODE_ID.fullmatch(name)


@pytest.mark.parametrize("name", ["a", "A.b", "F\n", "Abcdefghijklmnopq", "7", ""])
def test_adding_a_node_under_a_name_outside_the_rule_is_one_clear_error(name: str) -> None:
    async def main() -> None:
        async with open_in_process_client(ClusterOptions(nodes=1, zones=1, memory=True)) as client:
            with pytest.raises(BadInput) as caught:
                await client.admin.add(name)
            assert (
                str(caught.value)
                == f"bad node name {name!r} (a capital letter, then letters, digits, _ or -)"
            )

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


@pytest.mark.parametrize("unit", [u for u, size in UNITS.items() if size >= 1])
def test_a_ttl_reads_and_shows_every_whole_second_unit_of_the_durations(unit: str) -> None:
    assert parse_ttl(f"3{unit}") == seconds_of(f"3{unit}") == 3 * UNITS[unit]
    assert show_ttl(parse_ttl(f"3{unit}")) == f"3{unit}"
    with pytest.raises(BadInput, match=r"bad ttl '1\.5ms'"):
        parse_ttl("1.5ms")


def test_every_exit_code_is_the_one_declaration() -> None:
    # vars(): the names are imported, not re-exported, and the test asks which object they are.
    assert vars(chaos_swarm_view)["EXIT_INTERRUPTED"] is exit_status.EXIT_INTERRUPTED == 130
    assert vars(demo_runner)["EXIT_INTERRUPTED"] is exit_status.EXIT_INTERRUPTED
    assert (vars(demo_runner)["EXIT_OK"], vars(demo_runner)["EXIT_FAILED"]) == (
        exit_status.EXIT_OK,
        exit_status.EXIT_FAILED,
    )
