"""The trio runtime shares the event loop: a node with more waiting than one batch lets other tasks
run between its steps, and still handles everything it was given."""

from __future__ import annotations

import trio
import trio.testing

from bhandar_cli.core.model.versions import JSON
from bhandar_cli.core.protocol.client_messages import PutRequest, PutResult
from bhandar_cli.core.protocol.messages import Result
from bhandar_cli.host.executor import BATCH
from bhandar_cli.node.runtime import NodeRunner
from tests.support.lone_host import lone_node_host


def test_a_node_given_several_batches_lets_other_tasks_run_between_its_steps() -> None:
    host = lone_node_host()
    total = 3 * BATCH
    answers: list[Result] = []
    progress_seen: list[int] = []  # answers counted each time the other task got a turn

    async def other_task() -> None:
        while len(answers) < total:
            progress_seen.append(len(answers))
            await trio.lowlevel.checkpoint()

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(NodeRunner(host).run)
            for rid in range(total):
                host.submit(PutRequest(rid, "kv", f"k{rid}", b'"v"', JSON, None, "ONE"), answers.append)
            nursery.start_soon(other_task)
            with trio.fail_after(30):
                while len(answers) < total:
                    await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert len(answers) == total and all(isinstance(a, PutResult) for a in answers)
    assert any(0 < n < total for n in progress_seen), progress_seen  # it ran while the node worked
