"""Why a write sent `via=NODE` was coordinated by another node, in one sentence for the reply.

A write is coordinated by a replica of its key (core/roles/coordinator.py): a node asked that is not one
forwards it to the first live home replica; a replica that is leaving the ring forwards it too,
and so does a forwarder whose first choice did not answer in time (a fallback). The reply names
its coordinator; this says why that is not the node the person asked.
"""

from __future__ import annotations


def forward_note(
    asked: str, coordinator: str, keyspace: str, key: str, replicas: tuple[str, ...] | None
) -> str:
    """The sentence for a write sent to `asked` and coordinated by `coordinator`; `replicas` are
    the key's home replicas as this client's ring has them (None when unknown)."""
    where = f"{keyspace}/{key}"
    if replicas is None:
        return f"{asked} did not coordinate the write to {where}: it forwarded to {coordinator}, a replica"
    if asked not in replicas:
        shown = ", ".join(replicas)
        return f"{asked} is not a replica of {where} ({shown}): it forwarded to {coordinator}"
    return (
        f"{asked} is a replica of {where} but forwarded to {coordinator} (it is leaving the ring, "
        "or its ring view differs)"
    )
