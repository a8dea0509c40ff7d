"""Which servers ``lockrace locks`` reads: the DSNs given, or the private servers that
lockrace processes (the app, ``lockrace run``) are running right now on this machine."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..registry import ENGINE_NAMES, ENGINES, Family, engine as engine_spec
from ..servers.process import pid_alive

# private server kinds (temp dir lockrace-KIND-*) per engine
KINDS = {str(e): spec.dirs for e, spec in ENGINES.items()}
_PG_KINDS = {kind for spec in ENGINES.values() if spec.family == Family.POSTGRES for kind in spec.dirs}


class NoServer(Exception):
    """Nothing to read: one sentence."""


@dataclass
class Source:
    engine: str  # postgres | mysql
    where: str  # shown, never with a password
    conninfo: str = ""
    mysql_kwargs: dict | None = None

    @classmethod
    def from_target(cls, target) -> "Source":
        """The server a race runs on (a ``Target``: private or DSN), for a lock view of it."""
        if target.family == "postgres":
            return cls("postgres", target.describe(), conninfo=target.conninfo)
        return cls("mysql", target.describe(), mysql_kwargs=dict(target.mysql_kwargs))

    def connect(self):
        from . import mysql, pg

        if self.engine == "postgres":
            return pg.connect(self.conninfo)
        return mysql.connect(self.mysql_kwargs or {})

    def read(self, conn):
        from . import mysql, pg

        return (pg if self.engine == "postgres" else mysql).read(conn, self.where)


def private_servers(engines=None) -> list[Source]:
    """The private servers lockrace processes run now (their temp dirs, with a live server)."""
    found = []
    kinds = [k for e in (engines or KINDS) for k in KINDS[e]]
    for kind in kinds:
        for path in sorted(Path(tempfile.gettempdir()).glob(f"lockrace-{kind}-*")):
            try:
                if kind in _PG_KINDS:
                    if (path / ".s.PGSQL.5432").exists() and pid_alive(path / "data" / "postmaster.pid"):
                        found.append(Source("postgres", f"lockrace's private {kind} server ({path})",
                                            conninfo=f"host={path} port=5432 user=postgres dbname=postgres"))
                elif (path / "mysqld.sock").exists() and pid_alive(path / "mysqld.pid"):
                    found.append(Source("mysql", f"lockrace's private {kind} server ({path})",
                                        mysql_kwargs={"unix_socket": str(path / "mysqld.sock"), "user": "root",
                                                      "password": "", "ssl_disabled": True}))
            except OSError:
                continue
    return found


def sources(engine: str | None, pg: str | None, mysql_dsn: str | None, galera: str | None,
            standby: str | None) -> list[Source]:
    from ..servers.target import DsnError, parse_mysql_dsn, pg_target, redact

    out: list[Source] = []
    try:
        for dsn in [pg] + (standby.split(",") if standby else []):
            if dsn:
                t = pg_target(dsn.strip())
                out.append(Source("postgres", t.describe(), conninfo=t.conninfo))
        for dsn in [mysql_dsn] + (galera.split(",") if galera else []):
            if dsn:
                out.append(Source("mysql", redact(dsn.strip()), mysql_kwargs=parse_mysql_dsn(dsn.strip())))
    except DsnError as exc:
        raise NoServer(str(exc)) from None
    if out:
        return out
    given = os.environ.get(engine_spec(engine).env, "") if engine else ""
    if given:  # the DSNs in the engine's environment variable, read as its flag's
        return sources(None, *[given if engine == e else None for e in ENGINE_NAMES])
    found = private_servers([engine] if engine else None)
    if not found:
        what = engine_spec(engine).short if engine else ""
        raise NoServer(f"no {what + ' ' if what else ''}server to read: no lockrace private server is running "
                       "(start lockrace in another terminal) and no --pg or --mysql DSN was given")
    return found
