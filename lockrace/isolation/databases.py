"""A clean place for each spec to run, as pg_regress gives isolationtester.

On a server lockrace started: a fresh database per spec (PostgreSQL: from
template0, C collation, with pg_regress's session settings as database
defaults; MySQL family: a new database), dropped afterwards.  On a server
given by DSN: only lockrace's own sandbox schema/database, emptied before each
spec.  Either way the output does not depend on the server's locale or on
what earlier runs left behind.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import deque

import psycopg
from psycopg import sql as pgsql
from psycopg.conninfo import make_conninfo

from ..servers.target import pg_options

SPEC_DB = "lockrace_isolation"
AHEAD = 2  # databases created ahead for the specs that follow

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
    """Where a spec's connections go on PostgreSQL.

    On an owned server the next spec's database is created in the background
    while the current spec runs (CREATE DATABASE costs ~0.4 s), when the caller
    says another spec follows."""

    def __init__(self, backend):
        self.backend = backend
        self.target = backend.target
        self.owned = self.target.owned
        self.conninfo = ""
        self.database = ""
        self._settings = dict(PG_DB_SETTINGS)
        self._counter = 0
        self._ahead: deque[asyncio.Task] = deque()
        self._drops: list[asyncio.Task] = []

    async def _admin(self) -> psycopg.AsyncConnection:
        return await psycopg.AsyncConnection.connect(self.target.conninfo, autocommit=True, connect_timeout=5)

    async def _create(self) -> str:
        self._counter += 1
        name = f"{SPEC_DB}_{self._counter}"
        conn = await self._admin()
        try:
            db = pgsql.Identifier(name)
            await conn.execute(pgsql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(db))
            await conn.execute(pgsql.SQL(
                "CREATE DATABASE {} TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'").format(db))
            for key, value in PG_DB_SETTINGS.items():
                await conn.execute(pgsql.SQL("ALTER DATABASE {} SET {} TO {}").format(
                    db, pgsql.Identifier(key), pgsql.Literal(value)))
        finally:
            await conn.close()
        return name

    async def _drop(self, name: str) -> None:
        try:
            conn = await self._admin()
        except psycopg.Error:
            return  # the server is gone, and its databases with it
        try:
            await conn.execute(pgsql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(pgsql.Identifier(name)))
        except psycopg.Error:
            pass
        finally:
            await conn.close()

    async def prepare(self, spec_name: str, more_coming: int = 0) -> str:
        """``more_coming``: how many specs will follow this one here; up to
        AHEAD of their databases are created while this spec runs."""
        if self.owned:
            task = self._ahead.popleft() if self._ahead else None
            self.database = await task if task is not None else await self._create()
            loop = asyncio.get_running_loop()
            while len(self._ahead) < min(AHEAD, int(more_coming)):
                self._ahead.append(loop.create_task(self._create()))
            self.conninfo = make_conninfo(self.target.conninfo, dbname=self.database)
            return self.conninfo
        await self.backend.reset_sandbox()
        settings = {"search_path": self.backend.sandbox, **self._settings}
        if getattr(self.backend, "server_version", 0) >= 140000:
            # a backend waiting on a lock notices within a second that lockrace is gone
            settings["client_connection_check_interval"] = "1000"
        conninfo = make_conninfo(self.target.conninfo, options=pg_options(self.target.conninfo, _options(settings)))
        try:
            conn = await psycopg.AsyncConnection.connect(conninfo, connect_timeout=5)
            await conn.close()
        except psycopg.Error:
            # not a superuser: lc_messages cannot be set; messages follow the server
            for key in _SUPERUSER_ONLY:
                self._settings.pop(key, None)
                settings.pop(key, None)
            conninfo = make_conninfo(self.target.conninfo, options=pg_options(self.target.conninfo, _options(settings)))
        self.conninfo = conninfo
        return conninfo

    def session_conninfo(self, spec_name: str, session: str) -> str:
        # pg_regress runs isolationtester with PGAPPNAME=isolation/TEST; it appends /SESSION
        return make_conninfo(self.conninfo, application_name=f"isolation/{spec_name}/{session}"[:63])

    async def release(self) -> None:
        """Drop the spec's database (owned) or empty the sandbox (DSN)."""
        if self.owned:
            if self.database and self._ahead:
                # more specs follow: let DROP DATABASE run while the next one starts
                self._drops.append(asyncio.get_running_loop().create_task(self._drop(self.database)))
            elif self.database:
                await self._drop(self.database)
            self.database = ""
        else:
            await self.backend.reset_sandbox()

    async def close(self) -> None:
        """Finish pending drops, and drop databases made for specs that never came."""
        await self.release()
        while self._ahead:
            task = self._ahead.popleft()
            try:
                await self._drop(await task)
            except Exception:
                pass
        drops, self._drops = self._drops, []
        await asyncio.gather(*drops, return_exceptions=True)


_places: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def pg_place(backend) -> PgPlace:
    """One PgPlace per backend, so that specs of one invocation share it."""
    place = _places.get(backend)
    if place is None:
        place = _places[backend] = PgPlace(backend)
    return place


async def close_places() -> None:
    for place in list(_places.values()):
        await place.close()
    _places.clear()
