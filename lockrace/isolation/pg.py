"""PostgreSQL connections for the isolation runner, at libpq level.

isolationtester drives libpq directly (PQsendQuery, PQconsumeInput,
PQisBusy, PQgetResult, a notice processor); so do we, through psycopg's
``pq`` wrapper, so that notices, error texts and result sets are exactly what
libpq hands to isolationtester.  Waiting is decided by the server:
``pg_isolation_test_session_is_blocked(pid, pids)`` on the control connection.
"""

from __future__ import annotations

import asyncio

import psycopg
from psycopg import pq
from psycopg.pq import abc as pq_abc  # the protocols pq.PGconn / pq.PGresult implement

from .pqprint import format_result
from .protocol import InputFailed, Item, SendFailed

_FIELD_SEV = pq.DiagnosticField.SEVERITY
_FIELD_MSG = pq.DiagnosticField.MESSAGE_PRIMARY


def _connect_sync(conninfo: str) -> pq_abc.PGconn:
    conn = pq.PGconn.connect(conninfo.encode())
    if conn.status != pq.ConnStatus.OK:
        message = conn.get_error_message() if hasattr(conn, "get_error_message") else conn.error_message.decode()
        conn.finish()
        raise ConnectionError(str(message).strip())
    return conn


def result_items(res: pq_abc.PGresult) -> list[Item]:
    status = res.status
    if status in (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.EMPTY_QUERY):
        return []
    if status == pq.ExecStatus.TUPLES_OK:
        columns = [res.fname(j) or b"" for j in range(res.nfields)]
        rows = [tuple(res.get_value(i, j) for j in range(res.nfields)) for i in range(res.ntuples)]
        return [Item("rows", format_result(columns, rows))]
    if status == pq.ExecStatus.FATAL_ERROR:
        sev, msg = res.error_field(_FIELD_SEV), res.error_field(_FIELD_MSG)
        if sev is not None and msg is not None:
            return [Item("error", b"%s:  %s\n" % (sev, msg))]
        return [Item("error", res.error_message + b"\n")]
    return [Item("other", b"unexpected result status: %s\n" % pq.ExecStatus(status).name.encode())]


class PgSession:
    """One spec session (or the control connection) on its own backend."""

    def __init__(self, conn: pq_abc.PGconn, name: str, emit, counted: bool):
        self.conn = conn
        self.name = name
        self.pid = conn.backend_pid
        self.total_notices = 0
        self.any_new_notice = False
        self._emit = emit
        prefix = name.encode()
        if counted:
            def on_notice(res) -> None:
                emit(prefix + b": " + res.error_message)
                self.total_notices += 1
                self.any_new_notice = True
        else:
            def on_notice(res) -> None:  # the control connection hides its notices
                return None
        conn.notice_handler = on_notice

    @classmethod
    async def open(cls, conninfo: str, name: str, emit, counted: bool = True) -> "PgSession":
        conn = await asyncio.to_thread(_connect_sync, conninfo)
        return cls(conn, name, emit, counted)

    # --- statements run to completion (setup / teardown), like PQexec
    async def exec_block(self, sql: str, timeout: float | None = None) -> tuple[bool, list[Item], bytes]:
        """Run ``sql`` as PQexec would; (ok, items of its *last* result,
        libpq's error message).

        After ``timeout`` seconds the statement is cancelled (upstream would
        wait for ever, e.g. a teardown behind a lock a session still holds)."""
        self.send(sql)
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while self.busy():
            if deadline is not None and loop.time() > deadline:
                self.cancel()
                deadline = None
            await self.wait_input(0.05 if deadline is not None else 3600.0)
        last = None
        while True:
            res = self.conn.get_result()
            if res is None:
                break
            last = res
        if last is None or last.status in (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.EMPTY_QUERY):
            return True, [], b""
        if last.status == pq.ExecStatus.TUPLES_OK:
            return True, result_items(last), b""
        return False, [], last.error_message or self.conn.error_message

    # --- a step sent and polled
    def send(self, sql: str) -> None:
        try:
            self.conn.send_query(sql.encode())
        except psycopg.Error:
            raise SendFailed(self.conn.error_message) from None

    def busy(self) -> bool:
        return self.conn.is_busy() == 1

    def consume(self) -> None:
        try:
            self.conn.consume_input()
        except psycopg.Error:
            raise InputFailed(self.conn.error_message) from None

    async def wait_input(self, timeout: float) -> bool:
        """Wait up to ``timeout`` for bytes from the server; consume them if any."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        sock = self.conn.socket

        def readable() -> None:
            if not fut.done():
                fut.set_result(True)

        loop.add_reader(sock, readable)
        try:
            await asyncio.wait_for(fut, timeout)
            got = True
        except TimeoutError:
            got = False
        finally:
            loop.remove_reader(sock)
        if got:
            self.consume()
        return got

    def results(self) -> list[Item]:
        items: list[Item] = []
        while True:
            res = self.conn.get_result()
            if res is None:
                break
            items.extend(result_items(res))
        return items

    def notifies(self, sessions: list["PgSession"]) -> list[bytes]:
        lines = []
        self._consume_quietly()  # as isolationtester: a failure here is not checked
        while True:
            n = self.conn.notifies()
            if n is None:
                break
            sender = next((s.name for s in sessions if s.pid == n.be_pid), None) or f"PID {n.be_pid}"
            lines.append(b'%s: NOTIFY "%s" with payload "%s" from %s\n'
                         % (self.name.encode(), n.relname, n.extra, sender.encode()))
            self._consume_quietly()
        return lines

    def _consume_quietly(self) -> None:
        try:
            self.conn.consume_input()
        except psycopg.Error:
            pass

    def cancel(self) -> bool:
        try:
            self.conn.get_cancel().cancel()
            return True
        except Exception:
            return False

    async def rollback_quietly(self) -> None:
        self.conn.notice_handler = lambda res: None  # isolationtester has exited by now
        try:
            while self.conn.get_result() is not None:
                pass
            await asyncio.to_thread(self.conn.exec_, b"ROLLBACK")
        except Exception:
            pass

    def close(self) -> None:
        try:
            self.conn.finish()
        except Exception:
            pass


class PgControl:
    """The control connection: global setup/teardown and the waiting question."""

    def __init__(self, session: PgSession):
        self.session = session

    async def prepare(self, pids: list[int]) -> None:
        array = "{" + ",".join(str(p) for p in pids) + "}"
        sql = f"SELECT pg_catalog.pg_isolation_test_session_is_blocked($1, '{array}')"
        res = await asyncio.to_thread(self.session.conn.prepare, b"isolationtester_waiting", sql.encode())
        if res.status != pq.ExecStatus.COMMAND_OK:
            raise RuntimeError("prepare of lock wait query failed: " + self.session.conn.error_message.decode())

    async def is_blocked(self, pid: int) -> bool:
        res = self.session.conn.exec_prepared(b"isolationtester_waiting", [str(pid).encode()])
        if res.status != pq.ExecStatus.TUPLES_OK or res.ntuples != 1:
            raise RuntimeError("lock wait query failed: " + self.session.conn.error_message.decode())
        return (res.get_value(0, 0) or b"")[:1] == b"t"

    async def exec_block(self, sql: str, timeout: float | None = None):
        return await self.session.exec_block(sql, timeout)

    def close(self) -> None:
        self.session.close()
