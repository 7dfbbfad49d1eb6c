"""One flipped byte on a node's disk, on a process cluster: only the records it hit are lost, the
node says so (log, `cluster status`, Prometheus metrics) and gets them back from the replicas.

Each test writes keys at ALL (every replica holds every key), stops node D with SIGKILL, flips one
byte in its data directory (in the middle of an SSTable data block, or of a WAL record in the
middle of the log), and restarts it. The cluster encrypts at rest (the default), so the byte
is ciphertext: the block fails its authentication tag, the WAL record its CRC. D's store finds
the damage at open; the node repairs the keyspace's ranges at once, which the background repair
(one range every 2 s) could not do in the deadline. `keys_repaired` counts the keys that differed
in those comparisons: the keys of the damaged block or record, from one or both peers, not the
rest of the node's keys.
"""

from __future__ import annotations

import json
import ssl
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from bhandar_cli.client.openers import open_tcp_client
from bhandar_cli.core.membership.ring import key_token
from bhandar_cli.core.model.records import Versioned
from bhandar_cli.core.model.values import encode_json
from bhandar_cli.fleet.cluster_file import ClusterFile
from bhandar_cli.fleet.cluster_secrets import cluster_key
from bhandar_cli.security.data_key import cipher_for
from bhandar_cli.storage import wal
from bhandar_cli.storage.disk.real_disk import RealDisk
from bhandar_cli.storage.record_kinds import decode_op
from bhandar_cli.storage.sstable import Table
from bhandar_cli.store.record_store import data_key
from tests.e2e.conftest import bearer, http_base, run_cli, tls_verify, wait_for

if TYPE_CHECKING:
    from bhandar_cli.client.backends.tcp_backend import TcpBackend
    from bhandar_cli.client.client import Client

VICTIM = "D"
KEYS = 1500


def _flip(path: str, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0x10]))


async def _write_all(client: Client[TcpBackend]) -> list[str]:
    keys = [f"key-{i:05d}" for i in range(KEYS)]

    async def put(chunk: list[str]) -> None:
        for key in chunk:
            await client.data.put("kv", key, encode_json(key), "application/json", "none", "ALL")

    async with trio.open_nursery() as nursery:
        for w in range(10):
            nursery.start_soon(put, keys[w::10])
    ring = client.backend.ring
    return [k for k in keys if VICTIM in ring.preference_list(key_token("kv", k), 3)]


def _holds(record: Any, key: str) -> bool:
    return isinstance(record, Versioned) and any(
        s.value is not None and json.loads(s.value) == key for s in record.siblings
    )


def _metrics(cluster: ClusterFile) -> str:
    verify = tls_verify(cluster)
    context = verify if isinstance(verify, ssl.SSLContext) else None
    request = urllib.request.Request(f"{http_base(cluster, VICTIM)}/metrics", headers=bearer(cluster))
    with urllib.request.urlopen(request, timeout=5, context=context) as r:
        return str(r.read().decode())


def _reported(cluster: ClusterFile, kind: str, path: str, offset: int) -> None:
    """The damage is in D's log, `cluster status` and metrics, naming the file and the offset."""
    where = f"{path} at offset {offset}"
    log = Path(cluster.node(VICTIM).log)
    wait_for(lambda: where in log.read_text(errors="replace"), 20, "the corruption in the node's log")
    out = run_cli("cluster", "status", "--cluster", cluster.dir, "--output", "json")
    assert out.returncode == 0, out.stderr
    [node] = [n for n in json.loads(out.stdout)["nodes"] if n["id"] == VICTIM]
    assert any(kind in c and where in c for c in node["conditions"]), node.get("conditions")
    text = run_cli("cluster", "status", "--cluster", cluster.dir).stdout.decode()
    assert where in text.replace("\n", "")
    assert f'bhandar_corruptions_total{{kind="{kind}"}} 1.0' in _metrics(cluster)


async def _restart_and_check(
    cluster: ClusterFile, client: Client[TcpBackend], mine: list[str], lost: set[str]
) -> int:
    """Restart D; every key is back on D within the deadline. Returns D's `keys_repaired`."""
    assert (await client.admin.revive(VICTIM))["changed"]
    backend = client.backend
    with trio.fail_after(60):  # a background round would take D's 48 comparisons × 2 s
        missing = set(mine)
        while missing:
            for key in sorted(missing):
                own, _ = await backend.node_records(VICTIM, "kv", key)
                if _holds(own, key):
                    missing.discard(key)
            if missing:
                assert missing <= lost, f"keys outside the damage are missing: {sorted(missing - lost)[:5]}"
                await trio.sleep(0.5)
    metrics = await backend.node_metrics(VICTIM)
    return int(metrics.keys_repaired)


def test_a_flipped_byte_in_an_sstable_block_loses_only_that_block(fresh_cluster: ClusterFile) -> None:
    data_dir = fresh_cluster.node(VICTIM).data_dir

    async def main() -> tuple[str, int, set[str], int]:
        async with open_tcp_client(fresh_cluster.dir) as client:
            mine = await _write_all(client)
            await client.admin.on_nodes("flush", VICTIM)
            assert (await client.admin.kill(VICTIM))["changed"]
            # The table with most of D's keys, and a data block in its middle.
            paths = sorted(str(p) for p in Path(data_dir).glob("*.sst"))
            cipher = cipher_for(cluster_key(fresh_cluster))
            assert cipher is not None
            tables = [Table(RealDisk(), p, cipher=cipher) for p in paths]
            table = max(tables, key=lambda t: t.records)
            blocks = table.block_index()
            b = len(blocks) // 2
            offset, length, last = blocks[b]
            after = blocks[b - 1][2]
            lost = {k for k in mine if after < data_key("kv", k) <= last}
            assert 0 < len(lost) < len(mine) // 10
            for t in tables:
                t.close()
            _flip(table.path, offset + length // 2)
            repaired = await _restart_and_check(fresh_cluster, client, mine, lost)
            return table.path, offset, lost, repaired

    path, offset, lost, repaired = trio.run(main)
    _reported(fresh_cluster, "sstable_block", path, offset)
    assert len(lost) <= repaired <= 2 * len(lost)  # only the block's keys differed


def test_a_flipped_byte_in_the_middle_of_the_wal_loses_only_that_record(fresh_cluster: ClusterFile) -> None:
    data_dir = fresh_cluster.node(VICTIM).data_dir

    async def main() -> tuple[str, int, int]:
        async with open_tcp_client(fresh_cluster.dir) as client:
            mine = await _write_all(client)
            assert (await client.admin.kill(VICTIM))["changed"]
            # The newest WAL, and the data record in the middle of it.
            path = max(str(p) for p in Path(data_dir).glob("*.log"))
            log = wal.parse(Path(path).read_bytes(), cipher_for(cluster_key(fresh_cluster)))
            assert log.version == wal.ENCRYPTED_VERSION and not log.corrupt
            offsets = log.offsets
            prefix = data_key("kv", "")
            data = [i for i, p in enumerate(log.payloads) if decode_op(p)[1].startswith(prefix)]
            assert len(data) > 400
            i = data[len(data) // 2]
            key = decode_op(log.payloads[i])[1][len(prefix) :].decode()
            _flip(path, offsets[i] + wal.HEADER_SIZE + 2)
            repaired = await _restart_and_check(fresh_cluster, client, mine, {key})
            return path, offsets[i], repaired

    path, offset, repaired = trio.run(main)
    _reported(fresh_cluster, "wal_record", path, offset)
    assert 1 <= repaired <= 2  # the one record's key, from one or both peers
