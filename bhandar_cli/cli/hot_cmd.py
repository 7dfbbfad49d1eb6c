"""`bhandar hot [N]`: the keys clients ask for most on a running process cluster, as the REPL's `hot`
shows them (the same client call and the same view).

Exit codes: 0 ok, 1 failed (cluster unavailable), 2 usage (N out of range).
"""

from __future__ import annotations

from typing import Any

import typer

from bhandar_cli.cli.output import CLUSTER_OPTION, OUTPUT_OPTION, emit_json, fail
from bhandar_cli.client import EXIT_USAGE, OutputFormat, exit_code


def hot(
    n: int = typer.Argument(10, metavar="[N]", help="How many keys to show (1 to 32)."),
    cluster: str | None = CLUSTER_OPTION,
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """The N keys with the highest client request rates: rate, share of all requests, replicas,
    where their requests entered, and each node's load as a replica of them."""
    from bhandar_cli.cli.cluster_cmd import run_async
    from bhandar_cli.client import open_tcp_client
    from bhandar_cli.core.model import BadInput, ClientError
    from bhandar_cli.repl import Reply, make_consoles, print_reply

    async def body() -> Any:
        async with open_tcp_client(cluster) as client:
            try:
                return await client.views.hot(n)
            except (ClientError, BadInput) as exc:
                return exc

    result = run_async("hot", output, body)
    if isinstance(result, BadInput | ClientError):
        error = result if isinstance(result, ClientError) else ClientError(result.code, str(result))
        if output is OutputFormat.json:
            emit_json(error.to_json("hot"))
        fail(str(error), EXIT_USAGE if isinstance(result, BadInput) else exit_code(error.code))
    if output is OutputFormat.json:
        emit_json(result)
    else:
        out, _ = make_consoles()
        print_reply(out, Reply("hot", True, result), "table")
