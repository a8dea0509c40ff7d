"""Database drivers behind one interface: PostgreSQL (psycopg) and MySQL family (PyMySQL)."""

from __future__ import annotations

from ..servers.target import Target
from .base import Backend, ConnectError


async def open_backend(target: Target) -> Backend:
    """Connect to ``target``, detect flavor and version, create the sandbox.

    A ``Cluster`` (servers/cluster.py) opens as a ``ClusterBackend``: one
    ordinary backend per node."""
    from ..servers.cluster import Cluster

    if isinstance(target, Cluster):
        from .cluster import open_cluster

        return await open_cluster(target)
    if target.engine == "postgres":
        from .postgres import PostgresBackend

        return await PostgresBackend(target).open()
    from .mysql import MySQLBackend

    return await MySQLBackend(target).open()


__all__ = ["Backend", "ConnectError", "open_backend"]
