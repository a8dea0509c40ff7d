"""One home per database flavor: what differs between PostgreSQL, MariaDB and MySQL.

The engine asks a backend's dialect (``backend.dialect``, or ``dialect_for(flavor)``)
and never compares an engine or flavor name itself.  See dialects/base.py for the
contract and docs/internals.md ("Dialects")."""

from __future__ import annotations

from .base import NOWAIT, Dialect
from .mariadb import MARIADB
from .mysql import MYSQL
from .postgres import POSTGRES

DIALECTS: dict[str, Dialect] = {d.name: d for d in (POSTGRES, MARIADB, MYSQL)}

__all__ = ["DIALECTS", "Dialect", "MARIADB", "MYSQL", "NOWAIT", "POSTGRES", "dialect_for"]


def dialect_for(flavor: str) -> Dialect:
    """The dialect of lockrace's flavor name (postgres | mariadb | mysql8)."""
    try:
        return DIALECTS[flavor]
    except KeyError:
        raise ValueError(f"no dialect for flavor {flavor!r} (known: {', '.join(DIALECTS)})") from None
