"""One home per database flavor: what differs between PostgreSQL, MariaDB and MySQL.

The engine asks a backend's dialect (``backend.dialect``, or ``dialect_for(flavor)``)
and never compares an engine or flavor name itself.  See dialects/base.py for the
contract and docs/internals.md ("Dialects")."""

from __future__ import annotations

from ..registry import Family, Flavor, engine
from .base import NOWAIT, Dialect
from .mariadb import MARIADB
from .mysql import MYSQL
from .mysql_family import MySQLFamilyDialect
from .postgres import POSTGRES

DIALECTS: dict[str, Dialect] = {d.name: d for d in (POSTGRES, MARIADB, MYSQL)}


class _AnyMySQL(MySQLFamilyDialect):
    name = Flavor.MYSQL
    label = "MySQL/MariaDB"


MYSQL_FAMILY: Dialect = _AnyMySQL()
"""What every MySQL-family server shares, for a choice made before the server says
which one it is (its statement limit is MariaDB's or MySQL's: ask the backend's)."""
FAMILY_DIALECTS: dict[str, Dialect] = {Family.POSTGRES: POSTGRES, Family.MYSQL: MYSQL_FAMILY}

__all__ = ["DIALECTS", "Dialect", "MARIADB", "MYSQL", "NOWAIT", "POSTGRES", "dialect_for", "family_dialect",
           "mysql_dialect_of"]


def dialect_for(flavor: str) -> Dialect:
    """The dialect of lockrace's flavor name (postgres | mariadb | mysql8; mysql: what
    every MySQL-family server shares)."""
    try:
        return DIALECTS[flavor]
    except KeyError:
        if flavor == Flavor.MYSQL:
            return MYSQL_FAMILY
        raise ValueError(f"no dialect for flavor {flavor!r} (known: {', '.join(DIALECTS)})") from None


def family_dialect(name: str) -> Dialect:
    """The dialect every server of an engine's family shares (``name``: an engine or a
    family: postgres, mysql, galera, postgres-standby)."""
    try:
        family = Family(name)
    except ValueError:
        family = engine(name).family
    return FAMILY_DIALECTS[family]


def mysql_dialect_of(version: str) -> MySQLFamilyDialect:
    """The dialect of a MySQL-family server by what its ``SELECT VERSION()`` says
    (MariaDB names itself there: ``10.11.19-MariaDB``; MySQL does not: ``9.7.4``)."""
    return MARIADB if "mariadb" in version.lower() else MYSQL
