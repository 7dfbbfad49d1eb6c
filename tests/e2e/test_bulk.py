"""`bhandar export` and `bhandar import` between two process clusters: siblings stay siblings,
counters keep their value, binary values their bytes; failures are counted, named and exit 1."""

from __future__ import annotations

import json
import uuid
from typing import Any

from bhandar_cli.fleet.cluster_file import ClusterFile
from tests.e2e.conftest import run_cli


def ok(*args: str, stdin: bytes | None = None) -> bytes:
    proc = run_cli(*args, stdin=stdin)
    assert proc.returncode == 0, (args, proc.stderr)
    return proc.stdout


def pipe(cluster: ClusterFile, lines: list[str]) -> None:
    ok("pipe", "--cluster", cluster.dir, stdin="\n".join(lines).encode())


def read_back(cluster: ClusterFile, keyspace: str, keys: list[str]) -> dict[str, Any]:
    """key -> sorted JSON of its live values, or the counter's value, read at ALL."""
    proc = run_cli(
        "pipe",
        "--cluster",
        cluster.dir,
        "-c",
        "ALL",
        stdin="\n".join(f"get {keyspace} {k}" for k in keys).encode(),
    )
    out = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    return {r["key"]: sorted(json.dumps(v, sort_keys=True) for v in r["values"]) for r in out}


def test_a_keyspace_with_siblings_and_counters_round_trips(
    shared_cluster: ClusterFile, small_cluster: ClusterFile
) -> None:
    ks, cs = f"b{uuid.uuid4().hex[:8]}", f"c{uuid.uuid4().hex[:8]}"
    pipe(shared_cluster, [f"keyspace create {ks}", f"keyspace create {cs} policy=counter"])
    keys = [f"k{i}" for i in range(40)]
    lines = [f"put {ks} {k} {i}" for i, k in enumerate(keys)]
    # Concurrent blind writes through three coordinators: three siblings each.
    lines += [
        f"put {ks} cart{j} '\"{item}\"' ctx=none via={via}"
        for j in range(5)
        for via, item in zip("ABC", ("rice", "oil", "salt"), strict=True)
    ]
    lines += [f"put {ks} gone 1", f"delete {ks} gone"]
    lines += [f"incr {cs} n{j} {j + 1} via={via}" for j in range(10) for via in "ABD"]
    pipe(shared_cluster, lines)
    ok("put", ks, "blob", "-", "--cluster", shared_cluster.dir, stdin=b"\x00\xffbytes\x01")

    dump = ok("export", ks, "--cluster", shared_cluster.dir, "-c", "ALL")
    counters = ok("export", cs, "--cluster", shared_cluster.dir)
    exported = [json.loads(line) for line in dump.decode().splitlines()]
    assert exported[0]["bhandar_export"] == 1 and exported[0]["policy"] == "siblings"
    by_key = {line["key"]: line for line in exported[1:]}
    all_keys = [*keys, *(f"cart{j}" for j in range(5)), "blob"]
    assert sorted(by_key) == sorted(all_keys)  # the tombstoned key is left out
    assert all(len(by_key[f"cart{j}"]["siblings"]) == 3 for j in range(5))

    summary = json.loads(ok("import", ks, "--cluster", small_cluster.dir, "-o", "json", stdin=dump))
    assert (summary["ok"], summary["keys"], summary["failed"]) == (True, len(all_keys), 0)
    assert summary["siblings"] == 40 + 15 + 1
    ok("import", cs, "--cluster", small_cluster.dir, stdin=counters)

    assert read_back(small_cluster, ks, all_keys) == read_back(shared_cluster, ks, all_keys)
    counter_keys = [f"n{j}" for j in range(10)]
    assert read_back(small_cluster, cs, counter_keys) == {f"n{j}": [str(3 * (j + 1))] for j in range(10)}
    again = [
        json.loads(line) for line in ok("export", ks, "--cluster", small_cluster.dir).decode().splitlines()
    ]
    assert again[0] == exported[0]
    assert {line["key"]: sorted(map(json.dumps, line["siblings"])) for line in again[1:]} == {
        key: sorted(map(json.dumps, line["siblings"])) for key, line in by_key.items()
    }  # the same values, base64 bytes included (the contexts are the target's own)


def test_failed_lines_are_counted_named_and_exit_1(shared_cluster: ClusterFile) -> None:
    ks = f"f{uuid.uuid4().hex[:8]}"
    header = {"bhandar_export": 1, "keyspace": "src", "policy": "siblings", "n": 3, "quorum": "sloppy"}
    lines = [
        json.dumps(header),
        json.dumps({"key": "good", "siblings": [{"value": 1}]}),
        "not json",
        json.dumps({"key": "nobytes", "siblings": [{"base64": "!!"}]}),
        json.dumps({"key": "also-good", "siblings": [{"value": "x"}, {"value": "y"}]}),
    ]
    proc = run_cli(
        "import", ks, "--cluster", shared_cluster.dir, "-o", "json", stdin="\n".join(lines).encode()
    )
    assert proc.returncode == 1, proc.stderr
    summary = json.loads(proc.stdout)
    assert (summary["keys"], summary["siblings"], summary["failed"]) == (2, 3, 2)
    assert sorted(f["line"] for f in summary["failures"]) == [3, 4]
    assert {f["code"] for f in summary["failures"]} == {"bad_input"}
    assert read_back(shared_cluster, ks, ["good", "also-good"]) == {
        "good": ["1"],
        "also-good": ['"x"', '"y"'],
    }


def test_a_keyspace_that_does_not_exist_or_does_not_fit_is_exit_2(shared_cluster: ClusterFile) -> None:
    assert run_cli("export", "nosuchks", "--cluster", shared_cluster.dir).returncode == 2
    lines = json.dumps({"key": "k", "siblings": [{"value": 1}]})
    assert (
        run_cli("import", "nosuchks", "--cluster", shared_cluster.dir, stdin=lines.encode()).returncode == 2
    )
    header = {"bhandar_export": 1, "keyspace": "kv", "policy": "siblings", "n": 3, "quorum": "sloppy"}
    refused = run_cli(
        "import", "counters", "--cluster", shared_cluster.dir, stdin=json.dumps(header).encode()
    )
    assert refused.returncode == 2 and b"counter" in refused.stderr
