"""Look at a server from outside lockrace: which of its connections are left.

These helpers open their own plain driver connections (never lockrace's), so
what they report is the server's own view.
"""

from __future__ import annotations


from pathlib import Path

import psycopg
import pymysql
from support.waits import eventually

from lockrace.servers.target import Target

CHECKER_APP = "fault-check"


def pg_connect(target: Target, dbname: str | None = None) -> psycopg.Connection:
    kwargs = {"autocommit": True, "application_name": CHECKER_APP, "connect_timeout": 5}
    if dbname:
        kwargs["dbname"] = dbname
    return psycopg.connect(target.conninfo, **kwargs)


def mysql_connect(target: Target, database: str | None = None) -> pymysql.connections.Connection:
    return pymysql.connect(**target.mysql_kwargs, database=database, autocommit=True, connect_timeout=5)


def lockrace_backends(target: Target, idents: list[int] = ()) -> list[tuple]:
    """Connections lockrace holds on the server.

    PostgreSQL: every backend whose application_name starts with 'lockrace'.
    MySQL family (no application name): the given connection ids still present.
    """
    if target.family == "postgres":
        with pg_connect(target) as conn:
            return conn.execute(
                "SELECT pid, application_name, state, query FROM pg_stat_activity"
                " WHERE application_name LIKE 'lockrace%%' AND pid <> pg_backend_pid()"
            ).fetchall()
    if not idents:
        return []
    conn = mysql_connect(target)
    try:
        cur = conn.cursor()
        ids = ",".join(str(int(i)) for i in idents)
        cur.execute(f"SELECT ID, USER, COMMAND, INFO FROM information_schema.PROCESSLIST WHERE ID IN ({ids})")
        return list(cur.fetchall())
    finally:
        conn.close()


def wait_until_gone(target: Target, idents: list[int] = (), timeout: float = 5.0) -> list[tuple]:
    """Poll until lockrace has no connection left (a closed socket takes the
    server a moment to notice); returns what is still there at the end."""
    return eventually(lambda: lockrace_backends(target, idents), lambda left: not left, timeout=timeout,
                      fail=False)


def private_server_connect(engine: str, tmpdir: Path):
    """A connect() to the private server a ``lockrace`` subprocess started under ``tmpdir``
    (its TMPDIR): over the server's own Unix socket, as root / postgres. The socket is
    looked for at each connect, so this may be made before the server runs."""
    def connect():
        name = ".s.PGSQL.5432" if engine == "postgres" else "mysqld.sock"
        sockets = sorted(tmpdir.rglob(name))
        assert sockets, f"no private {engine} server under {tmpdir}"
        if engine == "postgres":
            return psycopg.connect(f"host={sockets[0].parent} port=5432 user=postgres dbname=postgres",
                                   autocommit=True, application_name=CHECKER_APP, connect_timeout=5)
        return pymysql.connect(unix_socket=str(sockets[0]), user="root", password="", autocommit=True,
                               connect_timeout=5)

    return connect


def sleeping(engine: str, connect) -> int:
    """How many statements sleep on the server right now (pg_sleep / SLEEP), as the
    server itself reports them; ``connect`` opens a connection to it."""
    if engine == "postgres":
        sql = ("SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query ILIKE '%%pg_sleep(%%'"
               " AND pid <> pg_backend_pid()")
    else:
        sql = ("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE '%%SLEEP(%%'"
               " AND ID <> CONNECTION_ID()")
    conn = connect()
    try:
        if engine == "postgres":
            return conn.execute(sql).fetchone()[0]
        with conn.cursor() as cur:
            cur.execute(sql)
            return cur.fetchone()[0]
    finally:
        conn.close()


def target_connect(target: Target):
    """A connect() to the server ``target`` names (a checker's own connection)."""
    return (lambda: pg_connect(target)) if target.family == "postgres" else (lambda: mysql_connect(target))
