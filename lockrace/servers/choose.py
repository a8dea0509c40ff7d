"""The server or cluster an engine runs on: a private one lockrace starts, or the DSN given."""

from __future__ import annotations

from .cluster import Cluster, cluster_target
from .target import Target, mysql_target, pg_target


def target_for(engine: str, dsn: str | None) -> Target | Cluster:
    """The server (a ``Target``) or cluster (a ``Cluster``) for ``engine``; blocking."""
    if engine == "postgres":
        return pg_target(dsn)
    if engine == "mysql":
        return mysql_target(dsn)
    return cluster_target(engine, dsn)
