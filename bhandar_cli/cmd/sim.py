"""`bhandar sim ...`: the seed's simulators (filled in by the seed-simulator work)."""

from __future__ import annotations

import typer

sim_app = typer.Typer(help="Reproduce the seed's simulations (ring, quorum, versions, ministore).")
