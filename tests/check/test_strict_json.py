"""`-o json` is strict JSON: the staleness curve's open-ended last bucket is null with a flag (not
Infinity), `emit_json`, which every command's `-o json` goes through, refuses non-finite floats,
and the checklist's JSON parses strictly."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from bhandar_cli.check.catalog import scenarios
from bhandar_cli.check.check_report import to_json
from bhandar_cli.check.check_run import CheckOptions, CheckOutcome
from bhandar_cli.check.maelstrom_history import VALID, MaelstromHistory, Verdict
from bhandar_cli.cli.check_cmd import check
from bhandar_cli.cli.output import emit_json
from tests.check.support import py


def refuse(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def emitted(obj: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> str:
    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    emit_json(obj)
    return out.getvalue()


def test_the_open_ended_staleness_bucket_is_null_and_flagged(monkeypatch: pytest.MonkeyPatch) -> None:
    curve = ((5.0, 0.9, 10), (math.inf, 0.5, 4))
    verdict = Verdict(VALID, "checked", (), {"lost": 0}, curve)
    outcome = CheckOutcome(
        CheckOptions(argv=("true",), workload="g-set", log_dir="/nonexistent"),
        ["n0"],
        [],
        MaelstromHistory(),
        verdict,
    )
    out = json.loads(emitted(to_json(outcome), monkeypatch), parse_constant=refuse)
    assert out["staleness"] == [
        {"upto_ms": 5.0, "open_ended": False, "fresh": 0.9, "samples": 10},
        {"upto_ms": None, "open_ended": True, "fresh": 0.5, "samples": 4},
    ]


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan])
def test_emit_json_refuses_non_finite_floats(bad: float, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="JSON compliant"):
        emitted({"cmd": "x", "value": bad}, monkeypatch)


def test_the_checklist_json_is_strict_and_names_the_workloads_scenarios(tmp_path: Path) -> None:
    app = typer.Typer(add_completion=False)

    @app.callback()
    def root() -> None:
        """Test harness."""

    app.command("check")(check)
    args = ["check", "--bin", " ".join(py("echo.py")), "-w", "echo", "--checklist", "-o", "json"]
    args += ["--log-dir", str(tmp_path), "--time-limit", "0.4s", "--recovery", "0.2s", "--timeout", "0.4s"]
    result = CliRunner().invoke(app, [*args, "--rate", "40", "--seed", "3"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout, parse_constant=refuse)
    assert [row["scenario"] for row in out["checklist"]] == list(scenarios("echo"))
    assert out["ok"] is True and all(row["verdict"] == "valid" for row in out["checklist"])
