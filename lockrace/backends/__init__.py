"""Database drivers behind one interface: PostgreSQL (psycopg) and MySQL family (PyMySQL)."""

from __future__ import annotations

from typing import Callable

from ..registry import TopologyName
from ..servers.cluster import Cluster
from ..servers.target import Target
from .base import Backend, ConnectError
from .cluster import ClusterHooks, open_cluster
from .single import open_single


def _galera() -> ClusterHooks:
    from .galera import hooks

    return hooks()


def _standby() -> ClusterHooks:
    from .pg_standby import hooks

    return hooks()


CLUSTER_HOOKS: dict[TopologyName, Callable[[], ClusterHooks]] = {
    TopologyName.GALERA: _galera, TopologyName.POSTGRES_STANDBY: _standby,
}
"""What each cluster topology adds to its nodes' ordinary backends (see backends/cluster.py)."""


async def open_backend(target: Target | Cluster) -> Backend:
    """Connect to ``target``, detect flavor and version, create the sandbox.

    A ``Cluster`` (servers/cluster.py) opens as a ``ClusterBackend``: one
    ordinary backend per node, with its topology's hooks."""
    if isinstance(target, Cluster):
        make = CLUSTER_HOOKS.get(TopologyName(target.topology))
        return await open_cluster(target, make() if make else None)
    return await open_single(target)


__all__ = ["Backend", "CLUSTER_HOOKS", "ConnectError", "open_backend"]
