"""The web server's snapshots are coalesced: however busy the cluster and the session, a page gets
at most one snapshot per MIN_INTERVAL, and none are built while no page is open (virtual clock)."""

from __future__ import annotations

import trio
import trio.testing

from bhandar_cli.client.openers import ClusterOptions
from bhandar_cli.repl.batch import open_session
from bhandar_cli.web.server import MIN_INTERVAL, WebServer


def test_snapshots_are_built_at_most_five_times_a_second_and_only_for_an_open_page() -> None:
    async def main() -> tuple[int, int, int, float]:
        async with open_session(ClusterOptions(nodes=3, memory=True)) as session:
            server = WebServer(session, echo=lambda line, replies: None)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(server.produce)
                await trio.sleep(5)
                idle_built = server.snapshots_built  # no page open: nothing asked of the cluster
                server.clients = 1
                server.client_came.set()
                started, seq0 = trio.current_time(), server.seq
                for i in range(400):  # a busy session: every command changes what the page shows
                    await session.run_line(f"put kv k{i} {i}")
                    await trio.sleep(0.01)
                elapsed = trio.current_time() - started
                nursery.cancel_scope.cancel()
            return idle_built, server.snapshots_built, server.seq - seq0, elapsed

    idle_built, built, published, elapsed = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert idle_built == 0
    assert elapsed >= 4  # the session ran long enough to measure a rate
    assert 0 < published <= built <= elapsed / MIN_INTERVAL + 1
    assert MIN_INTERVAL >= 0.2  # at most five a second
