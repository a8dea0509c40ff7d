"""A clean place for each spec to run, as pg_regress gives isolationtester.

PostgreSQL, three ways, best first:

- on a server lockrace started: a fresh database per spec named
  ``isolation_regression`` as pg_regress names it (made ahead under another
  name while the previous spec runs, renamed when its spec starts), from
  template0, C collation, with pg_regress's session settings as database
  defaults; dropped afterwards;
- on a server given by DSN where the role may CREATE DATABASE: the same, in a
  database of lockrace's own (``<sandbox>_iso<N>``), marked as lockrace's with a
  comment naming its owner and held, while it lives, by a session advisory lock
  taken inside it by a connection of this run (the sandbox's ownership scheme,
  lockrace/backends/sandbox.py).  Dropped after the spec, on error and on
  Ctrl-C too; a marked one whose lock is free belongs to a run that is gone and
  the next run removes it.  lockrace never drops a database it cannot prove
  is its own;
- otherwise: lockrace's sandbox schema, emptied before each spec (what differs
  from upstream there: lockrace/isolation/README.md).

MySQL family: a new database per spec (own server) or the sandbox database.
Either way the output does not depend on the server's locale or on what
earlier runs left behind.
"""

from __future__ import annotations

import asyncio
import re
import weakref
from collections import deque

import psycopg
from psycopg import sql as pgsql
from psycopg.conninfo import make_conninfo

from ..backends import sandbox as sandbox_mod
from ..servers.target import pg_options
from ..core.rows import one

SPEC_DB = "isolation_regression"  # pg_regress's name for the database of an isolation test
AHEAD_DB = "lockrace_isolation"  # databases made ahead (own server), renamed to SPEC_DB when used
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


_SPEC_DB_NAME = re.compile(r"[a-z0-9_]+_iso[0-9]+")  # how lockrace names a spec database on a DSN server


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _options(settings: dict[str, str]) -> str:
    return " ".join(f"-c {k}={v.replace(' ', chr(92) + ' ')}" for k, v in settings.items())


def _ident(name: str) -> pgsql.Identifier:
    return pgsql.Identifier(name)


class PgPlace:
    """Where a spec's connections go on PostgreSQL (one per backend, shared by
    the specs of one invocation).

    On an owned server the next spec's database is created in the background
    while the current spec runs (CREATE DATABASE costs ~0.4 s), when the caller
    says another spec follows."""

    def __init__(self, backend):
        self.backend = backend
        self.target = backend.target
        self.owned = self.target.owned
        # "owned" (lockrace's server), "database" (a DSN server, a database of lockrace's own),
        # "schema" (a DSN server, the sandbox schema); "" until the first spec decides
        self.mode = "owned" if self.owned else ""
        self.conninfo = ""
        self.database = ""
        self.spec_name = ""
        self.token = sandbox_mod.new_token()
        self._settings = dict(PG_DB_SETTINGS)
        self._counter = 0
        self._ahead: deque[asyncio.Task] = deque()
        self._drops: list[asyncio.Task] = []
        self._owners: dict[str, psycopg.AsyncConnection] = {}  # database -> connection holding its lock

    # ------------------------------------------------------------------ helpers
    async def _connect(self, dbname: str | None = None, app: str = "lockrace isolation") -> psycopg.AsyncConnection:
        conninfo = self.target.conninfo if dbname is None else make_conninfo(self.target.conninfo, dbname=dbname)
        conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True, connect_timeout=5,
                                                     application_name=app)
        if not self.owned:
            # never wait long behind another client's lock on a server lockrace did not start
            await conn.execute(f"SET lock_timeout = '{sandbox_mod.DDL_LOCK_WAIT_S}s'")
        return conn

    async def _make(self, conn: psycopg.AsyncConnection, name: str) -> None:
        """CREATE DATABASE as pg_regress does, without its settings."""
        await conn.execute(pgsql.SQL(
            "CREATE DATABASE {} TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'").format(_ident(name)))

    async def _set_defaults(self, conn: psycopg.AsyncConnection, name: str) -> None:
        for key, value in list(self._settings.items()):
            try:
                await conn.execute(pgsql.SQL("ALTER DATABASE {} SET {} TO {}").format(
                    _ident(name), pgsql.Identifier(key), pgsql.Literal(value)))
            except psycopg.errors.InsufficientPrivilege:
                if key not in _SUPERUSER_ONLY:
                    raise
                self._settings.pop(key)  # not a superuser: messages follow the server

    async def _end_prepared(self, conn: psycopg.AsyncConnection, name: str) -> None:
        """Roll back the prepared transactions of database ``name`` (one lockrace made for a spec:
        they are the spec's, and DROP DATABASE refuses while one exists)."""
        cur = await conn.execute("SELECT gid FROM pg_prepared_xacts WHERE database = %s", [name])
        gids = [gid for (gid,) in await cur.fetchall()]
        if not gids:
            return
        inside = await self._connect(name)
        try:
            for gid in gids:
                try:
                    await inside.execute(pgsql.SQL("ROLLBACK PREPARED {}").format(pgsql.Literal(gid)))
                except psycopg.Error:
                    pass  # ended meanwhile
        finally:
            await inside.close()

    # ------------------------------------------------------------ own server
    async def _create_ahead(self) -> str:
        self._counter += 1
        name = f"{AHEAD_DB}_{self._counter}"
        conn = await self._connect()
        try:
            await conn.execute(pgsql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(_ident(name)))
            await self._make(conn, name)
            await self._set_defaults(conn, name)
        finally:
            await conn.close()
        return name

    async def _drop_owned(self, name: str) -> None:
        try:
            conn = await self._connect()
        except psycopg.Error:
            return  # the server is gone, and its databases with it
        try:
            await self._end_prepared(conn, name)
            await conn.execute(pgsql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(_ident(name)))
        except psycopg.Error:
            pass
        finally:
            await conn.close()

    async def _prepare_owned(self, more_coming: int) -> None:
        task = self._ahead.popleft() if self._ahead else None
        name = await task if task is not None else await self._create_ahead()
        loop = asyncio.get_running_loop()
        while len(self._ahead) < min(AHEAD, int(more_coming)):
            self._ahead.append(loop.create_task(self._create_ahead()))
        conn = await self._connect()
        try:
            cur = await conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [SPEC_DB])
            if await cur.fetchone():  # left by a spec whose drop did not finish
                await self._end_prepared(conn, SPEC_DB)
                await conn.execute(pgsql.SQL("DROP DATABASE {} WITH (FORCE)").format(_ident(SPEC_DB)))
            await conn.execute(pgsql.SQL("ALTER DATABASE {} RENAME TO {}").format(_ident(name), _ident(SPEC_DB)))
        finally:
            await conn.close()
        self.database = SPEC_DB
        self.conninfo = make_conninfo(self.target.conninfo, dbname=SPEC_DB)

    async def _release_owned(self) -> None:
        """Every backend in the spec's database is this spec's: end them and retire the name;
        while more specs follow, the database is renamed and dropped in the background."""
        name, self.database = self.database, ""
        if not name:
            return
        if not self._ahead:
            await self._drop_owned(name)
            return
        self._counter += 1
        retired = f"{AHEAD_DB}_done_{self._counter}"
        try:
            conn = await self._connect()
        except psycopg.Error:
            return
        try:
            await self._end_prepared(conn, name)
            await conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                               " WHERE datname = %s AND pid <> pg_backend_pid()", [name])
            await conn.execute(pgsql.SQL("ALTER DATABASE {} RENAME TO {}").format(_ident(name), _ident(retired)))
        except psycopg.Error:
            retired = name  # could not rename: drop it now
        finally:
            await conn.close()
        if retired == name:
            await self._drop_owned(name)
        else:
            self._drops.append(asyncio.get_running_loop().create_task(self._drop_owned(retired)))

    # ------------------------------------------------------------ a DSN server
    async def _choose(self) -> str:
        """"database" where the role may create databases, else "schema"."""
        conn = await self._connect()
        try:
            cur = await conn.execute("SELECT rolcreatedb OR rolsuper FROM pg_roles WHERE rolname = current_user")
            row = await cur.fetchone()
            if not (row and row[0]):
                return "schema"
            await self._sweep(conn)
        finally:
            await conn.close()
        return "database"

    def _is_spec_db(self, name: str, comment: str | None) -> bool:
        return sandbox_mod.is_marked(comment) and bool(_SPEC_DB_NAME.fullmatch(name))

    async def _sweep(self, conn: psycopg.AsyncConnection) -> None:
        """Drop spec databases of lockrace runs that are gone: marked, named as lockrace names
        them, and their advisory lock free (the run that held it ended)."""
        cur = await conn.execute(
            "SELECT datname, shobj_description(oid, 'pg_database') FROM pg_database"
            " WHERE left(shobj_description(oid, 'pg_database'), %s) = %s ORDER BY 1",
            [len(sandbox_mod.MARK), sandbox_mod.MARK])
        for name, comment in await cur.fetchall():
            if name in self._owners or not self._is_spec_db(name, comment):
                continue
            try:
                inside = await self._connect(name, "lockrace sweep")
            except psycopg.Error:
                continue
            try:
                cur = await inside.execute("SELECT pg_try_advisory_lock(%s::int4, %s::int4)",
                                           sandbox_mod.advisory_key(name))
                if not one(await cur.fetchone())[0]:
                    continue  # its owner is alive
                # the connections of that run: its spec sessions (isolation/SPEC/SESSION) and its own
                await inside.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database()"
                    " AND pid <> pg_backend_pid() AND (application_name LIKE 'isolation/%%'"
                    " OR application_name LIKE 'lockrace %%')")
            except psycopg.Error:
                continue
            finally:
                await inside.close()
            try:
                await self._end_prepared(conn, name)
                await conn.execute(pgsql.SQL("DROP DATABASE IF EXISTS {}").format(_ident(name)))
            except psycopg.Error:
                pass  # another client is connected to it: left for a later run

    async def _prepare_database(self) -> bool:
        """A database of lockrace's own for this spec; False if the server refuses one."""
        self._counter += 1
        name = f"{self.backend.sandbox}_iso{self._counter}"[:63]
        conn = await self._connect()
        created = False
        try:
            try:
                await self._make(conn, name)
            except psycopg.errors.InsufficientPrivilege:
                return False
            except psycopg.errors.DuplicateDatabase:
                raise sandbox_mod.SandboxError(
                    f"database {name} already exists; lockrace never touches a database it did not make:"
                    " set LOCKRACE_SANDBOX to another name (or leave it unset for a fresh one)") from None
            created = True
            # owned from now on: the lock first, then the mark (a mark without its lock is a dead run's)
            owner = await self._connect(name, "lockrace owner")
            self._owners[name] = owner
            for setting in ("idle_session_timeout", "idle_in_transaction_session_timeout"):
                try:
                    await owner.execute(pgsql.SQL("SET {} = 0").format(pgsql.Identifier(setting)))
                except psycopg.Error:
                    pass  # idle_session_timeout: PostgreSQL 14 on
            cur = await owner.execute("SELECT pg_try_advisory_lock(%s::int4, %s::int4)",
                                      sandbox_mod.advisory_key(name))
            if not one(await cur.fetchone())[0]:
                raise sandbox_mod.SandboxError(f"could not take the lock that marks database {name} as this run's")
            await conn.execute(pgsql.SQL("COMMENT ON DATABASE {} IS {}").format(
                _ident(name), pgsql.Literal(sandbox_mod.marker(self.token))))
            await self._set_defaults(conn, name)
        except BaseException:
            if created:
                self.database = name
                await asyncio.shield(self._release_database())
            raise
        finally:
            await conn.close()
        self.database = name
        settings = {}
        if getattr(self.backend, "server_version", 0) >= 140000:
            # a backend waiting on a lock notices within a second that lockrace is gone
            settings["client_connection_check_interval"] = "1000"
        self.conninfo = make_conninfo(self.target.conninfo, dbname=name,
                                      **({"options": pg_options(self.target.conninfo, _options(settings))} if settings else {}))
        return True

    async def _release_database(self) -> None:
        """Drop this run's spec database: its prepared transactions rolled back, this spec's
        backends ended; a foreign client still connected keeps it (and says so)."""
        name, self.database = self.database, ""
        owner = self._owners.pop(name, None)
        if not name:
            return
        try:
            conn = await self._connect()
        except psycopg.Error as exc:
            if owner is not None:
                await owner.close()
            raise sandbox_mod.SandboxError(
                f"could not drop database {name} that lockrace made for the spec: {_first_line(exc)}; it stays,"
                " marked as lockrace's, and the next lockrace run on this server removes it") from None
        try:
            mine = owner.info.backend_pid if owner is not None and not owner.closed else 0
            try:
                await self._end_prepared(conn, name)
                prefix = f"isolation/{self.spec_name}/"[:63]
                await conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s"
                    " AND pid <> pg_backend_pid() AND pid <> %s AND left(application_name, %s) = %s",
                    [name, mine, len(prefix), prefix])
            except psycopg.Error:
                pass
            if owner is not None:
                await owner.close()
            try:
                await conn.execute(pgsql.SQL("DROP DATABASE IF EXISTS {}").format(_ident(name)))
            except psycopg.errors.ObjectInUse:
                cur = await conn.execute(
                    "SELECT pid, application_name FROM pg_stat_activity WHERE datname = %s ORDER BY 1", [name])
                who = ", ".join(f"pid {pid}" + (f" ({app})" if app else "") for pid, app in await cur.fetchall())
                raise sandbox_mod.SandboxError(
                    f"could not drop database {name} that lockrace made for the spec: another client is connected"
                    f" to it{f' ({who})' if who else ''}; it stays, marked as lockrace's, and the next lockrace"
                    " run on this server removes it once that client is gone") from None
            except psycopg.Error as exc:
                raise sandbox_mod.SandboxError(
                    f"could not drop database {name} that lockrace made for the spec: {_first_line(exc)};"
                    " it stays, marked as lockrace's, and the next lockrace run on this server removes it") from None
        finally:
            await conn.close()

    # ------------------------------------------------------------ the sandbox schema
    async def _prepare_schema(self) -> None:
        await self._reset_schema()
        settings = {"search_path": self.backend.sandbox, **self._settings}
        if getattr(self.backend, "server_version", 0) >= 140000:
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

    async def _reset_schema(self) -> None:
        try:
            await self.backend.reset_sandbox()
        except psycopg.Error as exc:
            # e.g. the spec deleted catalog rows of its own objects: DROP SCHEMA cannot follow them
            raise sandbox_mod.SandboxError(
                f"could not empty the sandbox schema {self.backend.sandbox}: {_first_line(exc)};"
                " the schema is left in place") from None

    # ------------------------------------------------------------------ API
    async def prepare(self, spec_name: str, more_coming: int = 0) -> str:
        """``more_coming``: how many specs will follow this one here; up to
        AHEAD of their databases are created while this spec runs (own server)."""
        self.spec_name = spec_name
        if self.mode == "owned":
            await self._prepare_owned(more_coming)
            return self.conninfo
        if not self.mode:
            self.mode = await self._choose()
        if self.mode == "database" and await self._prepare_database():
            return self.conninfo
        self.mode = "schema"
        await self._prepare_schema()
        return self.conninfo

    def session_conninfo(self, spec_name: str, session: str) -> str:
        # pg_regress runs isolationtester with PGAPPNAME=isolation/TEST; it appends /SESSION
        return make_conninfo(self.conninfo, application_name=f"isolation/{spec_name}/{session}"[:63])

    async def release(self) -> None:
        """Drop the spec's database, or empty the sandbox schema."""
        if self.mode == "owned":
            await self._release_owned()
        elif self.mode == "database":
            await self._release_database()
        elif self.mode == "schema":
            await self._reset_schema()

    async def close(self) -> None:
        """Finish pending drops, and drop databases made for specs that never came."""
        try:
            if self.database:
                await self.release()
        finally:
            while self._ahead:
                task = self._ahead.popleft()
                try:
                    await self._drop_owned(await task)
                except Exception:
                    pass
            drops, self._drops = self._drops, []
            await asyncio.gather(*drops, return_exceptions=True)
            for owner in self._owners.values():  # never left: release() takes them; a last guard
                await owner.close()
            self._owners.clear()

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
