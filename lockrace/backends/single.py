"""Open the backend of one server (not a cluster): PostgreSQL or the MySQL family."""

from __future__ import annotations

from typing import Awaitable, Callable

from ..registry import Family
from ..servers.target import Target
from .base import Backend


def _open_postgres(target: Target) -> Awaitable[Backend]:
    from .postgres import PostgresBackend

    return PostgresBackend(target).open()


def _open_mysql(target: Target) -> Awaitable[Backend]:
    from .mysql import MySQLBackend

    return MySQLBackend(target).open()


# how each family's backend opens (its module is imported only when one is opened)
_OPENERS: dict[str, Callable[[Target], Awaitable[Backend]]] = {Family.POSTGRES: _open_postgres,
                                                                Family.MYSQL: _open_mysql}


async def open_single(target: Target) -> Backend:
    """Connect to one server, detect flavor and version, create the sandbox."""
    return await _OPENERS[target.family](target)
