"""MariaDB / MySQL connections for the isolation runner.

PyMySQL blocks, so a step runs in a worker thread of the spec's own pool and
"busy" means that thread has not returned.  Whether a step waits comes from
InnoDB's own views, through lockrace's MySQLMonitor (MariaDB:
INNODB_LOCK_WAITS, MySQL 8: performance_schema.data_lock_waits; metadata locks
from the processlist), and counts only when the holder is one of this spec's
sessions (or the server does not name one).

Errors print as the mysql client does: ``ERROR 1205 (HY000): message``.
Result sets print in isolationtester's format; NULL prints as nothing, as
there.  MySQL has no NOTICE: ``(step notices N)`` never completes here.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pymysql
from pymysql.constants import CLIENT

from ..backends.pymysql_adapter import TEXT_CONV, Connection, error_parts
from ..core import prepared as prepared_mod
from .pqprint import format_result
from .protocol import Item


def _b(value) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value
    return str(value).encode()


def _error_line(exc: Exception) -> bytes:
    errno, message = error_parts(exc)
    sqlstate = getattr(exc, "sqlstate", "HY000")
    if errno is None:
        return f"ERROR: {message}\n".encode()
    return f"ERROR {errno} ({sqlstate}): {message}\n".encode()


def connect(kwargs: dict, database: str | None) -> Connection:
    conn = Connection(**kwargs, database=database, autocommit=True, conv=TEXT_CONV, connect_timeout=5,
                       client_flag=CLIENT.MULTI_STATEMENTS, charset="utf8mb4")
    cur = conn.cursor()
    try:
        cur.execute("SET lc_messages = 'en_US'")
    except pymysql.MySQLError:
        pass
    cur.close()
    return conn


def run_sql(conn: Connection, sql: str) -> tuple[list[Item], bytes | None, list[Item]]:
    """Run ``sql`` (several statements allowed): (items of every result set,
    error line or None, items of the last result only)."""
    items: list[Item] = []
    last: list[Item] = []
    cur = conn.cursor()
    try:
        cur.execute(sql)
        while True:
            last = []
            if cur.description is not None:
                columns = [_b(d[0]) or b"" for d in cur.description]
                rows = [tuple(_b(v) for v in r) for r in cur.fetchall()]
                last = [Item("rows", format_result(columns, rows))]
                items.extend(last)
            if not cur.nextset():
                break
        return items, None, last
    except pymysql.MySQLError as exc:
        return items, _error_line(exc), []
    except (OSError, EOFError) as exc:
        return items, f"ERROR: connection lost: {exc}\n".encode(), []
    finally:
        try:
            cur.close()
        except Exception:
            pass


def prepared_xids(sql: str, into: set[str]) -> None:
    """Note the XA transactions ``sql`` prepares (and forget those it ends)."""
    prepared, finished = prepared_mod.changes(sql, None, "mysql")
    into.difference_update(finished)
    into.update(prepared)


class MySession:
    any_new_notice = False
    total_notices = 0

    def __init__(self, conn: Connection, name: str, pool: ThreadPoolExecutor, kill,
                 spec_xids: set[str] | None = None):
        self.conn = conn
        self.name = name
        self.pid = conn.thread_id()
        self.pool = pool
        self.kill = kill
        self.fut: asyncio.Future | None = None
        # XA transactions this session prepared and did not end: on MariaDB 10.5+ they outlive
        # the connection and keep their locks (the teardown and the sandbox drop would wait)
        self.prepared: set[str] = set()
        self.spec_xids = spec_xids if spec_xids is not None else set()  # every session's, for the last clean-up

    def _note(self, sql: str) -> None:
        prepared_xids(sql, self.prepared)
        prepared_xids(sql, self.spec_xids)

    async def end_permutation(self) -> None:
        """Before the teardown: roll back the XA transactions this session left prepared
        (a permutation's steps are over; nothing else would ever end them)."""
        if not self.prepared or self.busy():
            return
        loop = asyncio.get_running_loop()
        for xid in sorted(self.prepared):
            await loop.run_in_executor(self.pool, run_sql, self.conn, f"XA ROLLBACK {xid}")
            self.spec_xids.discard(xid)
        self.prepared.clear()

    async def exec_block(self, sql: str, timeout: float | None = None):
        loop = asyncio.get_running_loop()
        self._note(sql)
        fut = loop.run_in_executor(self.pool, run_sql, self.conn, sql)
        try:
            _, error, last = await asyncio.wait_for(asyncio.shield(fut), timeout)
        except TimeoutError:
            self.cancel()
            _, error, last = await fut
        if error is not None:
            return False, [], error
        return True, last, b""

    def send(self, sql: str) -> None:
        self._note(sql)
        self.fut = asyncio.get_running_loop().run_in_executor(self.pool, run_sql, self.conn, sql)

    def busy(self) -> bool:
        return self.fut is not None and not self.fut.done()

    def consume(self) -> None:
        return None

    async def wait_input(self, timeout: float) -> bool:
        if self.fut is None:
            return False
        done, _ = await asyncio.wait([self.fut], timeout=timeout)
        return bool(done)

    def results(self) -> list[Item]:
        fut, self.fut = self.fut, None
        assert fut is not None, "results() follows a send()"
        items, error, _ = fut.result()
        if error is not None:
            items = items + [Item("error", error)]
        return items

    def notifies(self, sessions) -> list[bytes]:
        return []

    def cancel(self) -> bool:
        return self.kill(self.pid)

    async def rollback_quietly(self) -> None:
        if self.fut is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self.fut), 5)
            except Exception:
                pass
            self.fut = None
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self.pool, run_sql, self.conn, "ROLLBACK")
        except Exception:
            pass

    def close(self) -> None:
        try:
            self.conn.close()
        except Exception:
            pass


class MyControl:
    def __init__(self, session: MySession, monitor):
        self.session = session
        self.monitor = monitor
        self.pids: set[int] = set()

    async def prepare(self, pids: list[int]) -> None:
        self.pids = set(pids)

    async def is_blocked(self, pid: int) -> bool:
        report = (await self.monitor.waits([pid])).get(pid)
        if report is None:
            return False
        return not report.blockers or bool(self.pids & set(report.blockers))

    async def exec_block(self, sql: str, timeout: float | None = None):
        return await self.session.exec_block(sql, timeout)

    def close(self) -> None:
        self.session.close()
