"""A clean place for each spec to run, as pg_regress gives isolationtester.

On a server lockrace started: a fresh database per spec (PostgreSQL: from
template0, C collation, with pg_regress's session settings as database
defaults; MySQL family: a new database), dropped afterwards.  On a server
given by DSN: only lockrace's own sandbox schema/database, emptied before each
spec.  Either way the output does not depend on the server's locale or on
what earlier runs left behind.
"""

from __future__ import annotations

import psycopg
from psycopg import sql as pgsql
from psycopg.conninfo import make_conninfo

SPEC_DB = "lockrace_isolation"

# What pg_regress sets for every test database / connection (PGTZ, PGDATESTYLE).
PG_DB_SETTINGS = {
    "lc_messages": "C",
    "lc_monetary": "C",
    "lc_numeric": "C",
    "lc_time": "C",
    "bytea_output": "hex",
    "timezone_abbreviations": "Default",
    "timezone": "America/Los_Angeles",
    "datestyle": "Postgres, MDY",
    "intervalstyle": "postgres",
}
_SUPERUSER_ONLY = ("lc_messages",)


def _options(settings: dict[str, str]) -> str:
    return " ".join(f"-c {k}={v.replace(' ', chr(92) + ' ')}" for k, v in settings.items())


class PgPlace:
    """Where a spec's connections go on PostgreSQL."""

    def __init__(self, backend):
        self.backend = backend
        self.target = backend.target
        self.owned = self.target.owned
        self.conninfo = ""
        self._settings = dict(PG_DB_SETTINGS)

    async def _admin(self) -> psycopg.AsyncConnection:
        conn = await psycopg.AsyncConnection.connect(self.target.conninfo, autocommit=True, connect_timeout=5)
        return conn

    async def prepare(self, spec_name: str) -> str:
        if self.owned:
            conn = await self._admin()
            try:
                db = pgsql.Identifier(SPEC_DB)
                await conn.execute(pgsql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(db))
                await conn.execute(pgsql.SQL(
                    "CREATE DATABASE {} TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'").format(db))
                for key, value in PG_DB_SETTINGS.items():
                    await conn.execute(pgsql.SQL("ALTER DATABASE {} SET {} TO {}").format(
                        db, pgsql.Identifier(key), pgsql.Literal(value)))
            finally:
                await conn.close()
            self.conninfo = make_conninfo(self.target.conninfo, dbname=SPEC_DB)
            return self.conninfo
        await self.backend.reset_sandbox()
        settings = {"search_path": self.backend.sandbox, **self._settings}
        conninfo = make_conninfo(self.target.conninfo, options=_options(settings))
        try:
            conn = await psycopg.AsyncConnection.connect(conninfo, connect_timeout=5)
            await conn.close()
        except psycopg.Error:
            # not a superuser: lc_messages cannot be set; messages follow the server
            for key in _SUPERUSER_ONLY:
                self._settings.pop(key, None)
                settings.pop(key, None)
            conninfo = make_conninfo(self.target.conninfo, options=_options(settings))
        self.conninfo = conninfo
        return conninfo

    def session_conninfo(self, spec_name: str, session: str) -> str:
        return make_conninfo(self.conninfo, application_name=f"isolation/{spec_name}/{session}"[:63])

    async def release(self) -> None:
        if self.owned:
            conn = await self._admin()
            try:
                await conn.execute(pgsql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    pgsql.Identifier(SPEC_DB)))
            finally:
                await conn.close()
        else:
            await self.backend.reset_sandbox()
