"""The one client API the faces use: `Client`, its backends, and operations built on it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bhandar_cli import lazy_face

if TYPE_CHECKING:
    from bhandar_cli.client.backend import Backend
    from bhandar_cli.client.backends.blocking_backend import open_blocking_client, run_to_completion
    from bhandar_cli.client.backends.in_process_backend import InProcessBackend
    from bhandar_cli.client.backends.tcp_backend import TcpBackend, open_tcp_backend
    from bhandar_cli.client.client import Client
    from bhandar_cli.client.cluster_admin import MembersView
    from bhandar_cli.client.cluster_health import (
        DOWN,
        LEFT,
        MARKS,
        MEANINGS,
        PARTITIONED,
        SUSPECTED,
        UP,
        ClusterHealth,
        Notices,
        news,
    )
    from bhandar_cli.client.cluster_views import (
        ClockView,
        HintsView,
        KeyspacesView,
        PrefsView,
        RingOwnershipView,
        StatusView,
    )
    from bhandar_cli.client.exit_status import (
        EXIT_FAILED,
        EXIT_INTERRUPTED,
        EXIT_NOT_FOUND,
        EXIT_OK,
        EXIT_USAGE,
        OutputFormat,
        exit_code,
    )
    from bhandar_cli.client.openers import (
        ClusterOptions,
        cluster_clock,
        open_in_process_client,
        open_tcp_client,
    )
    from bhandar_cli.client.outcomes import GetOutcome, IncrOutcome, WriteOutcome
    from bhandar_cli.client.procedures.access_token_issue import TokenCreated, create_token
    from bhandar_cli.client.procedures.bulk import (
        ExportHeader,
        ImportedKey,
        export_key,
        import_line,
        key_pages,
        keyspace_def,
        value_from_json,
    )
    from bhandar_cli.client.procedures.joining import replaced_text
    from bhandar_cli.client.procedures.pipeline import Pipeline

# The face: what other packages import from this one (tests/faces.txt pins it). Loaded on first
# use (PEP 562), so importing any module of the package costs no more than before.
__all__ = [
    "DOWN",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_NOT_FOUND",
    "EXIT_OK",
    "EXIT_USAGE",
    "LEFT",
    "MARKS",
    "MEANINGS",
    "PARTITIONED",
    "SUSPECTED",
    "UP",
    "Backend",
    "Client",
    "ClockView",
    "ClusterHealth",
    "ClusterOptions",
    "ExportHeader",
    "GetOutcome",
    "HintsView",
    "ImportedKey",
    "InProcessBackend",
    "IncrOutcome",
    "KeyspacesView",
    "MembersView",
    "Notices",
    "OutputFormat",
    "Pipeline",
    "PrefsView",
    "RingOwnershipView",
    "StatusView",
    "TcpBackend",
    "TokenCreated",
    "WriteOutcome",
    "cluster_clock",
    "create_token",
    "exit_code",
    "export_key",
    "import_line",
    "key_pages",
    "keyspace_def",
    "news",
    "open_blocking_client",
    "open_in_process_client",
    "open_tcp_backend",
    "open_tcp_client",
    "replaced_text",
    "run_to_completion",
    "value_from_json",
]
if not TYPE_CHECKING:  # mypy reads the imports above: a misspelt name is an error
    __getattr__, __dir__ = lazy_face(
        __name__,
        {
            "Backend": "backend",
            "Client": "client",
            "ClockView": "cluster_views",
            "ClusterHealth": "cluster_health",
            "ClusterOptions": "openers",
            "DOWN": "cluster_health",
            "EXIT_FAILED": "exit_status",
            "EXIT_INTERRUPTED": "exit_status",
            "EXIT_NOT_FOUND": "exit_status",
            "EXIT_OK": "exit_status",
            "EXIT_USAGE": "exit_status",
            "ExportHeader": "procedures.bulk",
            "GetOutcome": "outcomes",
            "HintsView": "cluster_views",
            "ImportedKey": "procedures.bulk",
            "InProcessBackend": "backends.in_process_backend",
            "IncrOutcome": "outcomes",
            "KeyspacesView": "cluster_views",
            "LEFT": "cluster_health",
            "MARKS": "cluster_health",
            "MEANINGS": "cluster_health",
            "MembersView": "cluster_admin",
            "Notices": "cluster_health",
            "OutputFormat": "exit_status",
            "PARTITIONED": "cluster_health",
            "Pipeline": "procedures.pipeline",
            "PrefsView": "cluster_views",
            "RingOwnershipView": "cluster_views",
            "SUSPECTED": "cluster_health",
            "StatusView": "cluster_views",
            "TcpBackend": "backends.tcp_backend",
            "TokenCreated": "procedures.access_token_issue",
            "UP": "cluster_health",
            "WriteOutcome": "outcomes",
            "cluster_clock": "openers",
            "create_token": "procedures.access_token_issue",
            "exit_code": "exit_status",
            "export_key": "procedures.bulk",
            "import_line": "procedures.bulk",
            "key_pages": "procedures.bulk",
            "keyspace_def": "procedures.bulk",
            "news": "cluster_health",
            "open_blocking_client": "backends.blocking_backend",
            "open_in_process_client": "openers",
            "open_tcp_backend": "backends.tcp_backend",
            "open_tcp_client": "openers",
            "replaced_text": "procedures.joining",
            "run_to_completion": "backends.blocking_backend",
            "value_from_json": "procedures.bulk",
        },
    )
