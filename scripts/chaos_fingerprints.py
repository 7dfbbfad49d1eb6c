"""The chaos fingerprint set: a few seeded chaos runs whose JSON must not change when code is moved,
compiled or tuned without meaning to change behaviour.

    python scripts/chaos_fingerprints.py            # run the set, compare with the golden file
    python scripts/chaos_fingerprints.py --write    # run the set, write the golden file

Each run's `bhandar chaos -o json` is kept whole except the fields that measure the machine (real
time, CPU, rates); what is left (every count, every fault, every event, the verdict) is a
fingerprint of the run. tests/sim/chaos/test_fingerprints.py checks the set on every test run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

GOLDEN = Path(__file__).resolve().parent.parent / "tests" / "golden" / "chaos-fingerprints.json"

# Different corners of the simulator: the default draw, the LSM engine on simulated disks, every
# fault, membership changes at ALL, a larger skewed cluster at ONE.
MEMBERSHIP = "join,decommission,kill,restart,partition"
RUNS: dict[str, list[str]] = {
    "seed7": ["--seed", "7", "--ops", "2000"],
    "seed42-lsm": ["--seed", "42", "--ops", "1500", "--storage", "lsm"],
    "seed3-all-faults": ["--seed", "3", "--ops", "1500", "--faults", "all"],
    "seed9-membership-all": ["--seed", "9", "--ops", "1500", "--faults", MEMBERSHIP, "-c", "ALL"],
    "seed1201-hot": ["--seed", "1201", "--ops", "1500", "--nodes", "12", "--hot", "0.5", "-c", "ONE"],
}

# What the machine decides, not the run.
MACHINE_FIELDS = {
    "real_seconds",
    "events_per_second",
    "ops_per_second",
    "bare_loop_events_per_second",
    "events_ratio",
    "cpu_seconds",
    "cpu_us_per_op",
    "cpu_us_per_event",
}


def fingerprint(args: list[str]) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-m", "bhandar_cli", "chaos", *args, "-o", "json"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode not in (0, 1) or not done.stdout.strip():
        raise SystemExit(
            f"chaos {' '.join(args)} failed to run (exit {done.returncode}): {done.stderr[-500:]}"
        )
    report: dict[str, object] = json.loads(done.stdout)
    return {key: value for key, value in report.items() if key not in MACHINE_FIELDS}


def run_all() -> dict[str, dict[str, object]]:
    return {name: fingerprint(args) for name, args in RUNS.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write the golden file instead of comparing")
    write = parser.parse_args().write
    runs = run_all()
    if write:
        GOLDEN.write_text(json.dumps(runs, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"wrote {GOLDEN} ({len(runs)} runs)")
        return 0
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    changed = [name for name in RUNS if golden.get(name) != runs[name]]
    for name in changed:
        fields = sorted(
            k
            for k in set(golden.get(name, {})) | set(runs[name])
            if golden.get(name, {}).get(k) != runs[name].get(k)
        )
        print(f"{name} ({' '.join(RUNS[name])}): changed fields {', '.join(fields)}")
    print(f"{len(RUNS) - len(changed)} of {len(RUNS)} runs replay byte-identical")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
