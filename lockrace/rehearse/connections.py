"""Plain blocking driver connections for a rehearsal's threads.

Each connection is one of lockrace's own: opened by the backend (PostgreSQL:
search_path = the sandbox, application_name "lockrace ... rehearse-..."; on a
DSN server also client_connection_check_interval; MariaDB/MySQL: the sandbox
database), so everything a rehearsal does stays in the sandbox and a later
run can tell its connections apart.  Statements go through the driver's
lowest level that still releases the GIL while the server works (libpq's
PQexec through psycopg's ``pgconn``; on MariaDB/MySQL one COM_QUERY packet on
the socket PyMySQL logged in, see ``MyConn``), one statement string at a time,
and ``run`` returns the server's error instead of raising.

``Control`` is the one connection that ends the others: at the end of a
rehearsal, or at once when it is interrupted (a statement waiting on a lock
comes back with an error as soon as its backend is ended).
"""

from __future__ import annotations

import contextlib
import struct
import threading
from dataclasses import dataclass

from ..registry import Family

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
        self.conn = backend.connect_blocking(app)
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
        lines = text.decode(errors="replace").strip().splitlines()
        message = lines[0].strip() if lines else ""
        if res.status == pq.ExecStatus.FATAL_ERROR and self.pg.status != pq.ConnStatus.OK:
            return Failure(code, message, lost=True)
        if code.startswith("57P") or code.startswith("08"):  # admin shutdown / connection failure
            return Failure(code, message, lost=True)
        return Failure(code, message)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()


class MyConn:
    """A MariaDB/MySQL connection: PyMySQL logs in (and closes), then each statement
    is one COM_QUERY packet and its answer is read packet by packet without
    decoding rows -- a rehearsal needs when the answer ended and whether it was an
    error, not the values, and decoding them in Python cost the traffic a third of
    its throughput.  Multi-statement strings (several results) are read to the end."""

    def __init__(self, backend, app: str):
        from pymysql.constants import CLIENT

        from ..backends.pymysql_adapter import raw_io

        self.conn = backend.connect_blocking(backend.sandbox, role="session")
        if self.conn.client_flag & CLIENT.DEPRECATE_EOF:  # not what PyMySQL asks for: read its way
            raise RuntimeError("unexpected MariaDB/MySQL protocol flags")
        self.ident = self.conn.thread_id()
        self._send, self._read = raw_io(self.conn)

    def _packet(self) -> bytes:
        read = self._read
        head = read(4)
        if len(head) < 4:
            raise ConnectionError("the server closed the connection")
        n = head[0] | head[1] << 8 | head[2] << 16
        data = read(n)
        while n == 0xFFFFFF:  # a payload of 16 MB or more goes on in the next packet
            head = read(4)
            if len(head) < 4:
                raise ConnectionError("the server closed the connection")
            n = head[0] | head[1] << 8 | head[2] << 16
            data += read(n)
        if len(data) < n:
            raise ConnectionError("the server closed the connection")
        return data

    def run(self, sql: str) -> Failure | None:
        data = sql.encode()
        if len(data) + 1 >= 0xFFFFFF:
            return Failure("", "statement too long for one packet")
        try:
            self._send(struct.pack("<I", len(data) + 1)[:3] + b"\x00\x03" + data)
            packet = self._packet
            p = packet()
            while True:
                kind = p[0]
                if kind == 0x00:  # OK: affected rows, insert id, status flags
                    _, i = _lenenc(p, 1)
                    _, i = _lenenc(p, i)
                    status = p[i] | p[i + 1] << 8
                elif kind == 0xFF:
                    return _error(p)
                elif kind == 0xFB:  # LOAD DATA LOCAL INFILE asks for a file: not something traffic does
                    self.close()
                    return Failure("", "LOAD DATA LOCAL INFILE is not supported in a rehearsal", lost=True)
                else:  # a result set: column count, column definitions, EOF, rows, EOF
                    columns, _ = _lenenc(p, 0)
                    for _ in range(columns + 1):
                        packet()
                    while True:
                        p = packet()
                        if p[0] == 0xFE and len(p) < 9:
                            status = p[3] | p[4] << 8
                            break
                        if p[0] == 0xFF:
                            return _error(p)
                if not status & _MORE_RESULTS:
                    return None
                p = packet()
        except (OSError, ValueError, AttributeError, IndexError) as exc:  # the socket went away under the read
            return Failure("", str(exc), lost=True)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()


_MORE_RESULTS = 0x0008  # SERVER_MORE_RESULTS_EXISTS
_LOST_ERRNOS = (1927, 1053, 4031, 2006, 2013)  # killed, shutdown, idle timeout, gone, lost


def _lenenc(p: bytes, i: int) -> tuple[int, int]:
    c = p[i]
    if c < 0xFB:
        return c, i + 1
    if c == 0xFC:
        return p[i + 1] | p[i + 2] << 8, i + 3
    if c == 0xFD:
        return p[i + 1] | p[i + 2] << 8 | p[i + 3] << 16, i + 4
    return int.from_bytes(p[i + 1:i + 9], "little"), i + 9


def _error(p: bytes) -> Failure:
    errno = p[1] | p[2] << 8
    message = (p[9:] if p[3:4] == b"#" else p[3:]).decode("utf-8", "replace").split("\n")[0].strip()
    return Failure(str(errno), message, lost=errno in _LOST_ERRNOS)


def connect(backend, app: str):
    """A plain connection of ``backend``'s engine in its sandbox (blocking: call it in a thread)."""
    return _CONNECTIONS[backend.family](backend, app)


class Control:
    """The connection that ends the rehearsal's other connections on the server
    (``Control.of(backend)`` opens the one of its family)."""

    def __init__(self, conn):
        self.conn = conn
        self._lock = threading.Lock()  # stop() may come from two threads at once; a driver connection is not shared

    @staticmethod
    def of(backend) -> "Control":
        return _CONTROLS[backend.family].open(backend)

    def end(self, idents: list[int]) -> None:
        """End these backends / connection threads (their statements come back at once)."""
        if not idents:
            return
        with self._lock, contextlib.suppress(Exception):
            self._end(idents)

    @classmethod
    def open(cls, backend) -> "Control":
        raise NotImplementedError

    def _end(self, idents: list[int]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        with self._lock, contextlib.suppress(Exception):
            self.conn.close()


class _PgControl(Control):
    @classmethod
    def open(cls, backend) -> Control:
        return cls(backend.connect_blocking("rehearse-control", search_path=False))

    def _end(self, idents: list[int]) -> None:
        self.conn.execute("SELECT pg_terminate_backend(p) FROM unnest(%s::int[]) AS p", [idents])


class _MyControl(Control):
    @classmethod
    def open(cls, backend) -> Control:
        return cls(backend.connect_blocking(None, role="admin"))

    def _end(self, idents: list[int]) -> None:
        cur = self.conn.cursor()
        for ident in idents:
            with contextlib.suppress(Exception):
                cur.execute(f"KILL {int(ident)}")


_CONNECTIONS = {Family.POSTGRES: PgConn, Family.MYSQL: MyConn}
_CONTROLS: dict[str, type[Control]] = {Family.POSTGRES: _PgControl, Family.MYSQL: _MyControl}
