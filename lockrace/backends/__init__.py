"""Database drivers behind one interface: PostgreSQL (psycopg) and MySQL family (PyMySQL)."""

from __future__ import annotations

from ..servers.cluster import Cluster
from ..servers.target import Target
from .base import Backend, ConnectError
from .cluster import open_cluster
from .single import open_single


async def open_backend(target: Target | Cluster) -> Backend:
    """Connect to ``target``, detect flavor and version, create the sandbox.

    A ``Cluster`` (servers/cluster.py) opens as a ``ClusterBackend``: one
    ordinary backend per node."""
    if isinstance(target, Cluster):
        return await open_cluster(target)
    return await open_single(target)


__all__ = ["Backend", "ConnectError", "open_backend"]
