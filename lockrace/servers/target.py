"""Which server a race runs on: a private one lockrace starts, or a DSN.

Order of choice for each engine: the ``--pg`` / ``--mysql`` flag, then the
``LOCKRACE_PG_DSN`` / ``LOCKRACE_MYSQL_DSN`` environment variable, then a
private server (embedded PostgreSQL 18 from the wheel; MariaDB/MySQL from
``mariadbd`` / ``mysqld`` on PATH).  On a server lockrace did not start it
works only inside its own schema (PostgreSQL) or database (MySQL family).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from urllib.parse import parse_qs, unquote, urlsplit

from .process import PrivateServer

PG_ENV = "LOCKRACE_PG_DSN"
MYSQL_ENV = "LOCKRACE_MYSQL_DSN"
SANDBOX_ENV = "LOCKRACE_SANDBOX"
DEFAULT_SANDBOX = "lockrace"


class DsnError(Exception):
    """A DSN lockrace cannot use; the message never contains the password."""


@dataclass
class Target:
    engine: str  # postgres | mysql
    origin: str  # "embedded", "private" or "DSN"
    conninfo: str = ""  # PostgreSQL conninfo / URI
    mysql_kwargs: dict = field(default_factory=dict)
    sandbox: str = DEFAULT_SANDBOX
    server: PrivateServer | None = None

    @property
    def owned(self) -> bool:
        return self.server is not None

    def describe(self) -> str:
        """Where the server is, without any password."""
        if self.engine == "postgres":
            return redact(self.conninfo)
        kw = self.mysql_kwargs
        where = kw.get("unix_socket") or f"{kw.get('host', 'localhost')}:{kw.get('port', 3306)}"
        return f"mysql://{kw.get('user', '')}@{where}"

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()


def sandbox_name() -> str:
    name = os.environ.get(SANDBOX_ENV, DEFAULT_SANDBOX)
    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,40}", name):
        raise DsnError(f"{SANDBOX_ENV} must be a plain lower-case identifier, got {name!r}")
    return name


def redact(dsn: str) -> str:
    """Hide any password in a URI or key=value DSN.

    Errs on the side of hiding more: a URI's userinfo runs to the *last* '@'
    (a password may contain an unencoded '@'), and a quoted key=value password
    may contain backslash-escaped quotes or lack its closing quote.
    """
    dsn = re.sub(r"(://[^:/@]*:).*@", r"\1***@", dsn, flags=re.DOTALL)
    return re.sub(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'?|\S+)", r"\1***", dsn, flags=re.IGNORECASE)


def pg_target(dsn: str | None) -> Target:
    dsn = dsn or os.environ.get(PG_ENV) or None
    if dsn is None:
        from .embedded_postgres import EmbeddedPostgres

        server = EmbeddedPostgres()
        server.start()
        return Target("postgres", "embedded", conninfo=server.conninfo(), sandbox=DEFAULT_SANDBOX, server=server)
    if dsn.startswith(("mysql://", "mariadb://")):
        raise DsnError(f"{redact(dsn)} is a MySQL DSN; give it with --mysql")
    try:
        import psycopg.conninfo

        psycopg.conninfo.conninfo_to_dict(dsn)
    except Exception:  # psycopg raises ProgrammingError with the DSN text in it
        raise DsnError(f"not a PostgreSQL DSN: {redact(dsn)} (try postgresql://user@host:5432/dbname)") from None
    return Target("postgres", "DSN", conninfo=dsn, sandbox=sandbox_name())


def mysql_target(dsn: str | None) -> Target:
    dsn = dsn or os.environ.get(MYSQL_ENV) or None
    if dsn is None:
        from .private_mysql import PrivateMySQL

        server = PrivateMySQL()
        server.start()
        return Target("mysql", "private", mysql_kwargs=server.connect_kwargs(), server=server)
    return Target("mysql", "DSN", mysql_kwargs=parse_mysql_dsn(dsn), sandbox=sandbox_name())


def target_for(engine: str, dsn: str | None):
    """The server (a ``Target``) or cluster (a ``Cluster``) for ``engine``; blocking."""
    if engine == "postgres":
        return pg_target(dsn)
    if engine == "mysql":
        return mysql_target(dsn)
    from .cluster import cluster_target

    return cluster_target(engine, dsn)


def parse_mysql_dsn(dsn: str) -> dict:
    """mysql://user:password@host:port/?unix_socket=/path (mariadb:// too)."""
    try:
        parts = urlsplit(dsn)
        port = parts.port
    except ValueError:
        raise DsnError(f"not a MySQL DSN: {redact(dsn)} (try mysql://root@127.0.0.1:3306)") from None
    if parts.scheme not in ("mysql", "mariadb"):
        raise DsnError(f"not a MySQL DSN: {redact(dsn)} (try mysql://root@127.0.0.1:3306)")
    kwargs: dict = {"user": unquote(parts.username or "root"), "password": unquote(parts.password or "")}
    query = parse_qs(parts.query)
    if "unix_socket" in query:
        kwargs["unix_socket"] = query["unix_socket"][0]
        kwargs["ssl_disabled"] = True  # no TLS on a local socket (PyMySQL would build an SSL context per connect)
    else:
        kwargs["host"] = parts.hostname or "127.0.0.1"
        kwargs["port"] = port or 3306
    return kwargs
