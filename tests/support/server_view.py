"""Look at a server from outside lockrace: which of its connections are left.

These helpers open their own plain driver connections (never lockrace's), so
what they report is the server's own view.
"""

from __future__ import annotations

import time

import psycopg
import pymysql

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
    if target.engine == "postgres":
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
    deadline = time.monotonic() + timeout
    left = lockrace_backends(target, idents)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = lockrace_backends(target, idents)
    return left
