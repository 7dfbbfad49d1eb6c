"""The network model's per-sender streams: a sender's message fates do not depend on what other
senders drew in between, which is what makes an in-process run on trio's clock repeat (trio runs
the nodes' tasks in an order it shuffles)."""

from __future__ import annotations

from random import Random

from bhandar_cli.host import LatencyModel, NetworkModel


def _delays_of_a(model: NetworkModel, others_between: int) -> list[float]:
    out = []
    for _ in range(20):
        out.append(model.delay("A", "B"))
        for _ in range(others_between):
            model.delay("C", "D")
    return out


def test_a_senders_delays_do_not_depend_on_other_senders_draws() -> None:
    def model() -> NetworkModel:
        return NetworkModel(Random(7), LatencyModel(), per_sender=True)

    alone = _delays_of_a(model(), 0)
    assert _delays_of_a(model(), 1) == alone
    assert _delays_of_a(model(), 3) == alone
    assert len(set(alone)) > 1  # drawn, not a constant


def test_loss_and_duplication_are_drawn_per_sender_too() -> None:
    def fates(between: int) -> list[tuple[float, ...]]:
        model = NetworkModel(Random(7), LatencyModel(), per_sender=True)
        model.loss, model.duplicate = 0.3, 0.3
        out = []
        for _ in range(40):
            out.append(model.route("A", "B", "m"))
            for _ in range(between):
                model.route("C", "D", "m")
        return out

    alone = fates(0)
    assert fates(2) == alone
    assert () in alone and any(len(f) == 2 for f in alone)  # some lost, some duplicated


def test_the_in_process_cluster_draws_per_sender() -> None:
    from bhandar_cli.fleet import InProcessCluster

    def delays(between: int) -> list[float]:
        return _delays_of_a(InProcessCluster(5, seed=3).model, between)

    assert delays(2) == delays(0)


def test_the_simulator_keeps_one_stream() -> None:
    """The simulator steps nodes in its own fixed order: one stream, as its recorded runs drew."""
    one, shared = Random(7), NetworkModel(Random(7), LatencyModel())
    assert [shared.delay("A", "B") for _ in range(5)] == [LatencyModel().sample(one) for _ in range(5)]
