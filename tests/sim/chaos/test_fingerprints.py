"""The chaos fingerprint set replays byte-identical: moving, compiling or tuning code must not change
what a seeded run does. If this fails on purpose (a change meant to alter behaviour), say so in the
commit and run `python scripts/chaos_fingerprints.py --write`."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "chaos_fingerprints", ROOT / "scripts" / "chaos_fingerprints.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["chaos_fingerprints"] = module
    spec.loader.exec_module(module)
    return module


FINGERPRINTS = _load_script()
GOLDEN = json.loads(FINGERPRINTS.GOLDEN.read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", sorted(FINGERPRINTS.RUNS))
def test_a_seeded_run_replays_its_fingerprint(name: str) -> None:
    got = FINGERPRINTS.fingerprint(FINGERPRINTS.RUNS[name])
    assert got["events"] > 0 and got["ops"] > 0
    assert got == GOLDEN[name]
