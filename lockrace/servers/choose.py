"""The server or cluster an engine runs on: a private one lockrace starts, or the DSN given."""

from __future__ import annotations

from typing import Callable

from ..registry import Engine, engine as engine_spec
from .cluster import Cluster, cluster_target
from .target import Target, mysql_target, pg_target


def _galera() -> Cluster:
    from .galera import start_galera

    return start_galera()


def _standby() -> Cluster:
    from .pg_standby import start_standby

    return start_standby()


STARTERS: dict[Engine, Callable[[], Cluster]] = {Engine.GALERA: _galera, Engine.POSTGRES_STANDBY: _standby}
"""How each cluster engine starts privately (blocking; it stops what it started if it fails)."""
SINGLE: dict[Engine, Callable[[str | None], Target]] = {Engine.POSTGRES: pg_target, Engine.MYSQL: mysql_target}
"""Each single-server engine's server: its DSN (flag, then environment variable), or a private one."""


def target_for(engine: str, dsn: str | None) -> Target | Cluster:
    """The server (a ``Target``) or cluster (a ``Cluster``) for ``engine``; blocking."""
    spec = engine_spec(engine)
    if not spec.cluster:
        return SINGLE[spec.name](dsn)
    return cluster_target(spec.topology, dsn, STARTERS[spec.name])
