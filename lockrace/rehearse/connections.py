"""Plain blocking driver connections for a rehearsal's threads.

Each connection is one of lockrace's own: opened by the backend (PostgreSQL:
search_path = the sandbox, application_name "lockrace ... rehearse-..."; on a
DSN server also client_connection_check_interval; MariaDB/MySQL: the sandbox
database), so everything a rehearsal does stays in the sandbox and a later
run can tell its connections apart.  Statements go through the driver's
lowest level that still releases the GIL while the server works (libpq's
PQexec through psycopg's ``pgconn``; PyMySQL's ``query``), one statement
string at a time, and ``run`` returns the server's error instead of raising.

``Control`` is the one connection that ends the others: at the end of a
rehearsal, or at once when it is interrupted (a statement waiting on a lock
comes back with an error as soon as its backend is ended).
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass

LOCK_TIMEOUT_CODES = {"55P03", "1205"}  # PostgreSQL lock_not_available; MySQL ER_LOCK_WAIT_TIMEOUT


@dataclass(frozen=True)
class Failure:
    code: str  # SQLSTATE (PostgreSQL) or errno (MySQL family); "" for a lost connection
    message: str
    lost: bool = False

    @property
    def lock_timeout(self) -> bool:
        return self.code in LOCK_TIMEOUT_CODES

    def sentence(self) -> str:
        if self.lost:
            return f"the connection was lost ({self.message})" if self.message else "the connection was lost"
        return f"ERROR {self.code}: {self.message}" if self.code else self.message


class PgConn:
    def __init__(self, backend, app: str):
        from psycopg import pq

        self._pq = pq
        self.conn = backend._connect_blocking(app)
        self.pg = self.conn.pgconn
        self.ident = self.pg.backend_pid
        self._ok = (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK, pq.ExecStatus.EMPTY_QUERY)

    def run(self, sql: str) -> Failure | None:
        try:
            res = self.pg.exec_(sql.encode())
        except Exception as exc:  # no result at all: the connection is gone
            return Failure("", str(exc).strip().splitlines()[0] if str(exc).strip() else "", lost=True)
        if res.status in self._ok:
            return None
        pq = self._pq
        code = (res.error_field(pq.DiagnosticField.SQLSTATE) or b"").decode()
        text = (res.error_field(pq.DiagnosticField.MESSAGE_PRIMARY) or res.error_message or b"")
        message = text.decode(errors="replace").strip()
        if res.status == pq.ExecStatus.FATAL_ERROR and self.pg.status != pq.ConnStatus.OK:
            return Failure(code, message, lost=True)
        if code.startswith("57P") or code.startswith("08"):  # admin shutdown / connection failure
            return Failure(code, message, lost=True)
        return Failure(code, message)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()


class MyConn:
    def __init__(self, backend, app: str):
        import pymysql

        self._err = pymysql.MySQLError
        self.conn = backend._connect_sync(backend.sandbox, role="session")
        self.ident = self.conn.thread_id()

    def run(self, sql: str) -> Failure | None:
        conn = self.conn
        try:
            conn.query(sql)  # reads the whole answer (rows included)
            while getattr(conn._result, "has_next", False):  # more results of a multi-statement string
                conn.next_result()
            return None
        except self._err as exc:
            args = getattr(exc, "args", ())
            if len(args) >= 2 and isinstance(args[0], int):
                errno, message = args[0], str(args[1])
                # 2006/2013: gone / lost during the query; 1927 / 1317: killed
                lost = errno in (2006, 2013, 2055, 1927, 1053, 4031) or not self.conn.open
                return Failure(str(errno), message.split("\n")[0].strip(), lost=lost)
            return Failure("", str(exc), lost=True)
        except (OSError, AttributeError, ValueError) as exc:  # the socket went away under the driver
            return Failure("", str(exc), lost=True)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()


def connect(backend, app: str):
    """A plain connection of ``backend``'s engine in its sandbox (blocking: call it in a thread)."""
    return PgConn(backend, app) if backend.engine == "postgres" else MyConn(backend, app)


class Control:
    """The connection that ends the rehearsal's other connections on the server."""

    def __init__(self, backend):
        self.engine = backend.engine
        self._lock = threading.Lock()  # stop() may come from two threads at once; a driver connection is not shared
        if self.engine == "postgres":
            self.conn = backend._connect_blocking("rehearse-control", search_path=False)
        else:
            self.conn = backend._connect_sync(None, role="admin")

    def end(self, idents: list[int]) -> None:
        """End these backends / connection threads (their statements come back at once)."""
        if not idents:
            return
        with self._lock, contextlib.suppress(Exception):
            if self.engine == "postgres":
                self.conn.execute("SELECT pg_terminate_backend(p) FROM unnest(%s::int[]) AS p", [idents])
            else:
                cur = self.conn.cursor()
                for ident in idents:
                    with contextlib.suppress(Exception):
                        cur.execute(f"KILL {int(ident)}")

    def close(self) -> None:
        with self._lock, contextlib.suppress(Exception):
            self.conn.close()
