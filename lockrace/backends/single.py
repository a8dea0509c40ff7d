"""Open the backend of one server (not a cluster): PostgreSQL or the MySQL family."""

from __future__ import annotations

from ..servers.target import Target
from .base import Backend


async def open_single(target: Target) -> Backend:
    """Connect to one server, detect flavor and version, create the sandbox."""
    if target.family == "postgres":
        from .postgres import PostgresBackend

        return await PostgresBackend(target).open()
    from .mysql import MySQLBackend

    return await MySQLBackend(target).open()
