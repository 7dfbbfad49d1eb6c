"""The swarms run the client code users run: the chaos workload, the soak's clients, the data
client and the HTTP gateway all import the client session (core/session/client_session.py) and
none builds a data request itself."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import bhandar_cli
import bhandar_cli.core.session as core_session
from bhandar_cli.core.session import client_session

PACKAGE = Path(bhandar_cli.__file__).parent
DRIVERS = ["sim/chaos/workload.py", "soak/load.py", "client/data_client.py", "node/http/api.py"]


def imported_names(path: Path) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.setdefault(node.module, set()).update(alias.name for alias in node.names)
    return out


@pytest.mark.parametrize("driver", DRIVERS)
def test_each_driver_imports_the_client_session(driver: str) -> None:
    """Through the session package's face (tests/test_layout.py: other packages import faces), whose
    ClientSession is client_session.py's."""
    names = imported_names(PACKAGE / driver)
    assert "ClientSession" in names.get("bhandar_cli.core.session", set()), driver
    assert core_session.ClientSession is client_session.ClientSession


@pytest.mark.parametrize("driver", ["sim/chaos/workload.py", "soak/load.py", "client/data_client.py"])
def test_no_swarm_client_builds_a_get_or_an_increment_itself(driver: str) -> None:
    calls = {
        node.func.id
        for node in ast.walk(ast.parse((PACKAGE / driver).read_text(encoding="utf-8")))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }
    assert not calls & {"GetRequest", "PutRequest", "IncrRequest"}, driver
