"""The one client API the REPL and the CLI use, over an in-process cluster or node processes.

`Client` is composed of three parts over one backend (client/backend.py), each holding what it
needs: `data` (get, put, delete, incr: data_client.py, which a one-shot command uses alone),
`views` (status, ring, prefs, clock, hints, metrics, hot keys, keyspaces: cluster_views.py) and
`admin` (faults, membership, keyspace create, repair, storage, upgrade, configuration:
cluster_admin.py). All are async: `Client` runs inside trio, and one-shot commands run a `DataClient`
on a blocking backend whose awaits never suspend, without an event loop
(client/backends/blocking_backend.py), which is why trio is imported here only where it is used.
Data operations return outcome dataclasses (`outcomes.py`); views and admin calls return
dictionaries in the JSON shapes of the man page's JSON OUTPUT. Every failure is raised as
`ClientError` with a stable `code`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic, TypeVar

from bhandar_cli.client.cluster_admin import ClusterAdmin
from bhandar_cli.client.cluster_views import ClusterViews
from bhandar_cli.client.data_client import DataClient

if TYPE_CHECKING:
    from bhandar_cli.client.backend import Backend

B = TypeVar("B", bound="Backend", covariant=True)  # the backend's own type: what only it has (a cluster file)


class Client(Generic[B]):
    """A data client, the cluster views and the operations, sharing one backend."""

    def __init__(self, backend: B, consistency: str = "QUORUM", timeout: float = 5.0) -> None:
        self.backend = backend
        self.views = ClusterViews(backend)
        # A write sent via= a node that forwarded it says why: the views know the key's replicas.
        self.data = DataClient(backend, consistency, timeout)
        self.admin = ClusterAdmin(backend, self.data, self.views)
