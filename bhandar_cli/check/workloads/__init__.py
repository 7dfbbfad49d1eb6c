"""One module per workload of `bhandar check`: its operations, its answers and its checker; and
`workloads()`, every one by name. Each module builds on check/maelstrom_workload.py (what a workload is),
which knows none of them."""

from __future__ import annotations

from bhandar_cli.check.maelstrom_workload import MaelstromWorkload


def workloads() -> dict[str, type[MaelstromWorkload]]:
    """Every workload by name, in the order help lists them."""
    from bhandar_cli.check.workloads.counters import GCounter, PnCounter
    from bhandar_cli.check.workloads.dynamo_kv import DynamoKv
    from bhandar_cli.check.workloads.echo import Echo
    from bhandar_cli.check.workloads.kafka import Kafka
    from bhandar_cli.check.workloads.lin_kv import LinKv
    from bhandar_cli.check.workloads.sets import Broadcast, GSet
    from bhandar_cli.check.workloads.txn import TxnListAppend, TxnRwRegister
    from bhandar_cli.check.workloads.unique_ids import UniqueIds

    found: list[type[MaelstromWorkload]] = [
        Echo,
        UniqueIds,
        Broadcast,
        GSet,
        GCounter,
        PnCounter,
        LinKv,
        DynamoKv,
    ]
    found.append(Kafka)
    found += [TxnRwRegister, TxnListAppend]
    return {w.name: w for w in found}
