"""The soak: a load and a fault schedule on a real process cluster, judged by the chaos checker.

A harness like sim/, on the other side of the drivers: it uses the client over TCP, fleet/'s
supervisor and sim/'s checker, and none of them depends on it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bhandar_cli import lazy_face

if TYPE_CHECKING:
    from bhandar_cli.soak.run import SoakOptions, SoakProgress, own_cluster, run_soak

# The face: what other packages import from this one (tests/faces.txt pins it). Loaded on first
# use (PEP 562), so importing any module of the package costs no more than before.
__all__ = ["SoakOptions", "SoakProgress", "own_cluster", "run_soak"]
if not TYPE_CHECKING:  # mypy reads the imports above: a misspelt name is an error
    __getattr__, __dir__ = lazy_face(
        __name__, {"SoakOptions": "run", "SoakProgress": "run", "own_cluster": "run", "run_soak": "run"}
    )
