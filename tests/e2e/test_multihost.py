"""A secure cluster spread over the loopback addresses 127.0.0.2-6, its last node joining with a token.

Four nodes start with `cluster up --hosts 127.0.0.2-5`; a fifth, on 127.0.0.6, runs
`bhandar node run --join` with a token from `cluster join-token create`, becomes a member in every
other node's view and coordinates QUORUM writes and reads. The token does not work twice, a token
with a tampered CA pin does not work at all, and a node without TLS refuses a non-loopback address.

The token never appears on the joining process's command line, which every local user can read
in /proc/PID/cmdline (one did, and spent the token 18 ms after the node started): it comes from a
file, standard input or $BHANDAR_JOIN_TOKEN, and `--token TOKEN` is refused before anything runs.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from bhandar_cli.core.protocol.client_messages import GetRequest, GetResult, PutRequest, PutResult
from bhandar_cli.core.wire import from_wire, to_wire
from bhandar_cli.fleet.cluster_file import ClusterFile, NodeEntry
from bhandar_cli.fleet.placement import free_ports
from tests.e2e.conftest import JOINER_HOST, Joiner, rpc, run_cli, wait_for


def mint_join_token(cluster: ClusterFile) -> dict[str, Any]:
    made = run_cli("cluster", "join-token", "create", "--dir", cluster.dir, "-o", "json", "--ttl", "5m")
    assert made.returncode == 0, made.stderr.decode()
    answer: dict[str, Any] = json.loads(made.stdout)
    return answer


def member_rows(cluster: ClusterFile, node: str) -> dict[str, dict[str, Any]]:
    return {str(m["id"]): m for m in rpc(cluster, node, "members")}


def test_a_node_on_another_address_joins_with_a_token_and_serves_quorum_requests(
    spread_cluster: ClusterFile, joiners: Joiner, tmp_path: Path
) -> None:
    cluster = spread_cluster
    assert [n.host for n in cluster.nodes] == ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"]
    assert cluster.tls
    minted = mint_join_token(cluster)
    assert minted["id"] == "E" and minted["token"] in minted["command"]
    assert minted["command"].startswith(f"BHANDAR_JOIN_TOKEN={minted['token']} bhandar node run --join ")
    assert "--token" not in minted["command"]
    assert minted["via"] == "A" and minted["address"] == cluster.node("A").address
    unknown = run_cli("cluster", "join-token", "create", "--dir", cluster.dir, "--via", "Q")
    assert unknown.returncode == 1 and "unknown node 'Q'" in unknown.stderr.decode()
    (port,) = free_ports(1, JOINER_HOST)
    joiner = joiners.start("E", minted["token"], minted["address"], JOINER_HOST, port, how="file")

    # E in the cluster file's shape, so the tests' rpc() reaches it like the others.
    with_e = replace(
        cluster,
        nodes=(*cluster.nodes, NodeEntry("E", "z1", JOINER_HOST, port, -1, str(tmp_path / "E"), "")),
    )

    def everyone_sees_e() -> bool:
        assert joiner.poll() is None, (tmp_path / "E.log").read_text(errors="replace")
        rows = [member_rows(cluster, n.id).get("E") for n in cluster.nodes]
        return all(r is not None and r["up"] and r["status"] == "normal" for r in rows)

    wait_for(everyone_sees_e, 60.0, "every node to see E up and normal")
    # What another user of the machine sees of the running joiner: its command line, not the token.
    cmdline = Path(f"/proc/{joiner.pid}/cmdline").read_bytes().split(b"\0")
    assert b"--token-file" in cmdline and b"--join" in cmdline, cmdline
    secret = minted["token"].split(".")[-2].encode()
    assert not any(secret in arg or b"bhj1" in arg for arg in cmdline), cmdline
    assert os.stat(f"/proc/{joiner.pid}/cmdline").st_mode & 0o777 == 0o444  # readable by all
    assert os.stat(f"/proc/{joiner.pid}/environ").st_mode & 0o777 == 0o400  # its owner's only
    wait_for(lambda: {"A", "B", "C", "D", "E"} <= set(member_rows(with_e, "E")), 30.0, "E to know every node")
    tls = tmp_path / "E" / "tls"
    assert {oct(os.stat(p).st_mode & 0o777) for p in tls.iterdir()} == {"0o600"}
    assert os.stat(tls).st_mode & 0o777 == 0o700

    put = PutRequest(0, "kv", "joined", b'"over TLS"', "application/json", None, "QUORUM")
    wrote = from_wire(rpc(with_e, "E", "request", msg=to_wire(put)))
    assert isinstance(wrote, PutResult) and wrote.coordinator == "E" and wrote.acks >= 2, wrote
    got = from_wire(rpc(with_e, "E", "request", msg=to_wire(GetRequest(0, "kv", "joined", "QUORUM"))))
    assert isinstance(got, GetResult) and got.record is not None, got
    assert [s.value for s in got.record.siblings] == [b'"over TLS"']  # type: ignore[union-attr]
    # ... and the others read it too: E's write reached its replicas.
    from_a = from_wire(rpc(cluster, "A", "request", msg=to_wire(GetRequest(0, "kv", "joined", "QUORUM"))))
    assert isinstance(from_a, GetResult) and from_a.record is not None

    # The token is spent: a second machine cannot use it.
    again = joiners.start("F", minted["token"], minted["address"], "127.0.0.7", how="stdin")
    code, out = joiners.finish(again, "F")
    assert code != 0 and "already used" in out, out
    assert not (tmp_path / "F" / "tls").exists()

    # A token whose CA pin was tampered with: the joiner stops before the secret leaves.
    fresh = mint_join_token(cluster)
    pin = fresh["token"].rsplit(".", 1)[1]
    tampered = fresh["token"][: -len(pin)] + ("0" if pin[0] != "0" else "1") + pin[1:]
    mitm = joiners.start("G", tampered, fresh["address"], "127.0.0.8", how="env")
    code, out = joiners.finish(mitm, "G")
    assert code != 0 and "not the one the token pins" in out, out
    assert not (tmp_path / "G" / "tls").exists()
    assert set(member_rows(cluster, "A")) == {"A", "B", "C", "D", "E"}


def test_a_join_token_on_the_command_line_is_refused_in_one_line_before_anything_starts(
    tmp_path: Path,
) -> None:
    token = "bhj1.127.0.0.1:1.4000000000." + "ab" * 16 + "." + "cd" * 32
    joining = ("node", "run", "--join", "127.0.0.1:1", "--id", "F", "--data-dir", str(tmp_path / "F"))
    literal = run_cli(*joining, "--token", token)
    assert literal.returncode == 2, literal.stderr.decode()
    (line,) = literal.stderr.decode().strip().splitlines()
    assert "readable by every user" in line and "--token-file" in line and "BHANDAR_JOIN_TOKEN" in line
    assert not (tmp_path / "F").exists()
    # Nor without a token at all; a token file that is missing or empty says so.
    (tmp_path / "empty").write_text("\n")
    for extra, env, says in [
        ((), {}, "--join needs the join token"),
        (("--token-file", str(tmp_path / "missing")), {}, "cannot read"),
        (("--token-file", str(tmp_path / "empty")), {}, "holds no join token"),
        (("--token-file", "-"), {}, "standard input holds no join token"),
        ((), {"BHANDAR_JOIN_TOKEN": " "}, "--join needs the join token"),
    ]:
        refused = run_cli(*joining, *extra, env={"BHANDAR_JOIN_TOKEN": "", **env}, stdin=b"")
        assert refused.returncode == 2, (extra, refused.stderr.decode())
        (line,) = refused.stderr.decode().strip().splitlines()
        assert says in line, line
        assert not (tmp_path / "F" / "tls").exists()


def test_join_token_create_says_what_is_wrong_with_its_options(tmp_path: Path) -> None:
    bad_ttl = run_cli("cluster", "join-token", "create", "--dir", str(tmp_path), "--ttl", "8d")
    assert bad_ttl.returncode == 2 and "at most 7 days" in bad_ttl.stderr.decode()
    no_cluster = run_cli("cluster", "join-token", "create", "--dir", str(tmp_path))
    assert no_cluster.returncode == 1 and "no cluster in" in no_cluster.stderr.decode()


def test_a_node_without_tls_refuses_a_non_loopback_address(tmp_path: Path) -> None:
    refused = run_cli("node", "run", "--id", "Z", "--host", "0.0.0.0", "--data-dir", str(tmp_path / "Z"))
    assert refused.returncode == 2, refused.stderr.decode()
    (line,) = refused.stderr.decode().strip().splitlines()
    assert "refusing to listen on 0.0.0.0 without TLS" in line
    assert not (tmp_path / "Z").exists()
