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
_FAMILY_OF_KIND = {kind: spec.family for spec in ENGINES.values() for kind in spec.dirs}


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
        """The server a race runs on (a ``Target``: private or DSN), for a lock view of it
        (a target carries the conninfo or the connection arguments of its family)."""
        return cls(str(target.family), target.describe(), conninfo=target.conninfo,
                   mysql_kwargs=dict(target.mysql_kwargs))

    def _reader(self):
        """locks/pg.py or locks/mysql.py: the reader of this server's family."""
        from . import mysql, pg

        return {Family.POSTGRES: pg, Family.MYSQL: mysql}[Family(self.engine)]

    def connect(self):
        return self._reader().open_for(self)

    def read(self, conn):
        return self._reader().read(conn, self.where)


def private_servers(engines=None) -> list[Source]:
    """The private servers lockrace processes run now (their temp dirs, with a live server)."""
    found = []
    kinds = [k for e in (engines or KINDS) for k in KINDS[e]]
    for kind in kinds:
        for path in sorted(Path(tempfile.gettempdir()).glob(f"lockrace-{kind}-*")):
            try:
                source = _PRIVATE[_FAMILY_OF_KIND[kind]](kind, path)
            except OSError:
                continue
            if source is not None:
                found.append(source)
    return found


def _private_pg(kind: str, path: Path) -> Source | None:
    if (path / ".s.PGSQL.5432").exists() and pid_alive(path / "data" / "postmaster.pid"):
        return Source(Family.POSTGRES, f"lockrace's private {kind} server ({path})",
                      conninfo=f"host={path} port=5432 user=postgres dbname=postgres")
    return None


def _private_mysql(kind: str, path: Path) -> Source | None:
    if (path / "mysqld.sock").exists() and pid_alive(path / "mysqld.pid"):
        return Source(Family.MYSQL, f"lockrace's private {kind} server ({path})",
                      mysql_kwargs={"unix_socket": str(path / "mysqld.sock"), "user": "root", "password": "",
                                    "ssl_disabled": True})
    return None


# a private server's temp dir as its family's servers lay it out: the Source, or None if not running
_PRIVATE = {Family.POSTGRES: _private_pg, Family.MYSQL: _private_mysql}


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
