"""PostgreSQL through psycopg 3: sessions on worker threads (timed there), the
monitor and setup connections as AsyncConnections on the caller's loop.

Values are read as the server's own text (``pgresult.get_value``), so a
transcript shows exactly what psql or isolationtester would show.
"""

from __future__ import annotations

import re
from time import perf_counter_ns

import anyio.to_thread
import psycopg
from psycopg import capabilities, generators, pq, sql as pgsql
from psycopg.waiting import Wait

from ..engine.events import ROW_LIMIT, Budget, LockInfo, StatementResult
from ..engine.outcome import classify_postgres
from ..servers.target import Target, redact
from .base import Backend, ConnectError, MonitorConnection, RowLockHolders, SessionConnection, WaitReport

_BUDGET_GUCS = ("lock_timeout", "statement_timeout", "deadlock_timeout", "idle_in_transaction_session_timeout")
_BUDGETS_SQL = "SELECT " + ", ".join(f"current_setting('{g}')" for g in _BUDGET_GUCS)
_GUC_UNITS_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "min": 60_000.0, "h": 3_600_000.0, "d": 86_400_000.0}
_GUC_TIME = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(us|ms|s|min|h|d)?\s*$")


def _guc_ms(text: str | None) -> float:
    """A time GUC as current_setting() shows it ('100ms', '2s', '1h', '0') in ms."""
    m = _GUC_TIME.match(text or "")
    if not m:
        return 0.0
    return float(m.group(1)) * _GUC_UNITS_MS[m.group(2) or "ms"]

_WAITS_SQL = """
SELECT a.pid,
       pg_blocking_pids(a.pid),
       w.locktype, w.mode, w.relation::regclass::text, w.page, w.tuple,
       w.transactionid::text, w.classid, w.objid, w.objsubid,
       t.relation::regclass::text, t.page, t.tuple,
       {waited}
FROM pg_stat_activity a
LEFT JOIN LATERAL (SELECT * FROM pg_locks l WHERE l.pid = a.pid AND NOT l.granted LIMIT 1) w ON true
LEFT JOIN LATERAL (SELECT * FROM pg_locks l WHERE l.pid = a.pid AND l.granted AND l.locktype = 'tuple' LIMIT 1) t ON true
WHERE a.pid = ANY(%s) AND a.wait_event_type = 'Lock'
"""


def _connect_error(exc: Exception, target: Target) -> ConnectError:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    text = re.sub(r"^(connection failed|connection is bad): ", "", text)
    return ConnectError(f"cannot connect to PostgreSQL at {target.describe()}: {redact(text)}")


def _text_rows(cur) -> tuple[list[str], list[tuple]]:
    res = cur.pgresult
    if res is None or cur.description is None:
        return [], []
    ncols, nrows = res.nfields, res.ntuples
    columns = [res.fname(c).decode() for c in range(ncols)]
    rows = []
    for r in range(nrows):
        row = []
        for c in range(ncols):
            value = res.get_value(r, c)
            row.append(None if value is None else value.decode("utf-8", "replace"))
        rows.append(tuple(row))
    return columns, rows


_MAX_NOTICES = 50
_CHUNK_ROWS = 1000  # rows per message batch while streaming (libpq 17+ chunked mode)
_CHUNKED = capabilities.has_stream_chunked()
_SINGLE_TUPLE, _TUPLES_CHUNK, _TUPLES_OK = pq.ExecStatus.SINGLE_TUPLE, pq.ExecStatus.TUPLES_CHUNK, pq.ExecStatus.TUPLES_OK


def _res_rows(res, n: int) -> list[tuple]:
    """The first ``n`` rows of a result, as the server's own text."""
    ncols = res.nfields
    rows = []
    for r in range(n):
        row = []
        for c in range(ncols):
            value = res.get_value(r, c)
            row.append(None if value is None else value.decode("utf-8", "replace"))
        rows.append(tuple(row))
    return rows


def _drain_copy(pgconn):
    """Read a COPY TO STDOUT to its end without keeping it (a generator for Connection.wait)."""
    while True:
        nbytes, _ = pgconn.get_copy_data(1)
        if nbytes > 0:
            continue
        if nbytes < 0:  # done (-1) or failed (-2): the final result follows
            return
        while not (yield Wait.R):
            continue
        pgconn.consume_input()


class PostgresSession(SessionConnection):
    """One session's connection.  Statements run on a worker thread with a
    plain (blocking) psycopg connection, timed around the driver call inside
    that thread: a statement's elapsed time is then the server's answer time,
    never stretched by the event loop being busy (the app's screen redraws
    can hold the loop for tens of ms)."""

    def __init__(self, conn: psycopg.Connection, name: str):
        self.conn = conn
        self.name = name
        self.ident = conn.info.backend_pid
        self.notices: list[str] = []
        conn.add_notice_handler(self._on_notice)

    def _on_notice(self, diag: psycopg.errors.Diagnostic) -> None:
        if len(self.notices) >= _MAX_NOTICES:  # a RAISE NOTICE in a loop: keep the first ones
            if len(self.notices) == _MAX_NOTICES:
                self.notices.append("(more notices not kept)")
            return
        self.notices.append(f"{diag.severity_nonlocalized or diag.severity}:  {diag.message_primary}")

    @property
    def closed(self) -> bool:
        return self.conn.closed or self.conn.broken

    async def execute(self, sql: str) -> StatementResult:
        return await anyio.to_thread.run_sync(self._execute, sql)

    def _execute(self, sql: str) -> StatementResult:
        self.notices = []
        sets: list[StatementResult] = []
        t0 = perf_counter_ns()
        try:
            with self.conn.lock:
                self._stream(sql.encode("utf-8"), sets)
            t1 = perf_counter_ns()
        except psycopg.Error as exc:
            t1 = perf_counter_ns()
            diag = exc.diag
            sqlstate = getattr(exc, "sqlstate", None) or diag.sqlstate
            text = str(exc).strip()
            message = diag.message_primary or (text.splitlines()[0] if text else type(exc).__name__)
            closed = self.closed or isinstance(exc, psycopg.OperationalError) and sqlstate is None
            return StatementResult(
                classify_postgres(sqlstate, message, sql, connection_closed=closed),
                code=sqlstate or "", message=message, detail=diag.message_detail or "",
                severity=diag.severity_nonlocalized or diag.severity or "ERROR", elapsed_ns=t1 - t0, started_ns=t0,
                notices=list(self.notices), result_sets=sets,
            )
        if not sets:
            sets.append(StatementResult("ok"))
        last = sets[-1]
        last.elapsed_ns = t1 - t0
        last.started_ns = t0
        last.notices = list(self.notices)
        last.result_sets = sets
        return last

    def _stream(self, sql: bytes, sets: list[StatementResult]) -> None:
        """Send ``sql`` (one or several statements, simple query protocol) and read its
        results as the server streams them, in chunks: each result set keeps its first
        ROW_LIMIT rows and only counts the rest, so memory stays bounded whatever the
        size of the result.  A cancel from the monitor ends the stream with 57014."""
        conn, pgconn = self.conn, self.conn.pgconn
        pgconn.send_query(sql)
        if _CHUNKED:
            pgconn.set_chunked_rows_mode(_CHUNK_ROWS)
        else:
            pgconn.set_single_row_mode()
        conn.wait(generators.send(pgconn))
        error: psycopg.Error | None = None
        columns: list[str] | None = None
        rows: list[tuple] = []
        count = 0
        tag = b""
        try:
            while (res := conn.wait(generators.fetch(pgconn))) is not None:
                status = res.status
                if status in (_SINGLE_TUPLE, _TUPLES_CHUNK, _TUPLES_OK):
                    if columns is None:
                        columns = [res.fname(c).decode() for c in range(res.nfields)]
                    n = res.ntuples
                    if n and len(rows) < ROW_LIMIT:
                        rows.extend(_res_rows(res, min(n, ROW_LIMIT - len(rows))))
                    count += n
                    tag = res.command_status or tag  # on the last chunk or on the closing result
                    if status == _TUPLES_OK:  # the end of one result set
                        sets.append(StatementResult(
                            "ok", columns=columns, rows=rows, has_rows=True, row_count=count, rowcount=count,
                            tag=tag.decode("utf-8", "replace"),
                        ))
                        columns, rows, count, tag = None, [], 0, b""
                elif status in (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.EMPTY_QUERY):
                    tuples = res.command_tuples
                    sets.append(StatementResult(
                        "ok", tag=(res.command_status or b"").decode("utf-8", "replace"),
                        rowcount=tuples if tuples is not None else -1,
                    ))
                elif status == pq.ExecStatus.COPY_IN:
                    pgconn.put_copy_end(b"lockrace sends no COPY data")
                    conn.wait(generators.send(pgconn))
                elif status == pq.ExecStatus.COPY_OUT:
                    conn.wait(_drain_copy(pgconn))
                elif error is None:  # an error: the server runs nothing after it; read to the end
                    error = psycopg.errors.error_from_result(res, encoding="utf-8")
        except psycopg.Error:
            if error is None:
                raise
            # the server said why before it closed the connection (FATAL 25P03, 57P01): that is the answer
        if error is not None:
            raise error

    async def txn_state(self) -> str:
        if self.closed:
            return "closed"
        status = self.conn.info.transaction_status
        if status == pq.TransactionStatus.INERROR:
            return "failed transaction"
        if status in (pq.TransactionStatus.INTRANS, pq.TransactionStatus.ACTIVE):
            return "in transaction"
        return "idle"

    def _budgets(self) -> tuple[Budget, ...]:
        cur = self.conn.cursor()
        try:
            # current_setting() costs ~0.1 ms where the pg_settings view costs ~1.3 ms
            # (it builds every GUC): this runs after every SET, COMMIT and error.
            cur.execute(_BUDGETS_SQL)
            row = cur.fetchone()
        except psycopg.Error:
            return ()
        return tuple(Budget(g, _guc_ms(text)) for g, text in zip(_BUDGET_GUCS, row or ()))

    async def budgets(self) -> tuple[Budget, ...]:
        if self.closed or self.conn.info.transaction_status == pq.TransactionStatus.INERROR:
            return ()
        return await anyio.to_thread.run_sync(self._budgets)

    async def close(self) -> None:
        def close():
            try:
                self.conn.close()
            except psycopg.Error:
                pass

        await anyio.to_thread.run_sync(close)


class PostgresMonitor(MonitorConnection):
    def __init__(self, conn: psycopg.AsyncConnection, have_pgrowlocks: bool):
        self.conn = conn
        self.have_pgrowlocks = have_pgrowlocks
        # pg_locks.waitstart exists from PostgreSQL 14 on
        waited = "extract(epoch FROM clock_timestamp() - w.waitstart)::float8" \
            if conn.info.server_version >= 140000 else "NULL::float8"
        self._waits_sql = _WAITS_SQL.replace("{waited}", waited)

    async def waits(self, idents: list[int]) -> dict[int, WaitReport]:
        cur = self.conn.cursor()
        await cur.execute(self._waits_sql, [idents])
        reports = {}
        for (pid, blockers, locktype, mode, rel, page, tup, xid, classid, objid, objsubid,
             trel, tpage, ttup, waiting_s) in await cur.fetchall():
            lock = None
            if locktype == "advisory":
                key = f"{objid}" if objsubid == 1 else f"({classid}, {objid})"
                if objsubid == 1 and classid:
                    key = str((int(classid) << 32) | int(objid))
                lock = LockInfo("advisory", mode or "", "", key)
            elif locktype == "tuple":
                lock = LockInfo("tuple", mode or "", rel or "", f"{page},{tup}")
            elif locktype == "transactionid":
                # a row lock: the waiter holds the tuple lock and waits for the holder's xid
                detail = f"{tpage},{ttup}" if trel else f"xid {xid}"
                lock = LockInfo("tuple" if trel else "transactionid", mode or "", trel or "", detail)
            elif locktype:
                lock = LockInfo(locktype, mode or "", rel or "", "")
            reports[pid] = WaitReport(pid, tuple(blockers or ()), lock, waiting_s)
        return reports

    async def cancel(self, ident: int) -> bool:
        cur = await self.conn.execute("SELECT pg_cancel_backend(%s)", [ident])
        row = await cur.fetchone()
        return bool(row and row[0])

    async def terminate(self, ident: int) -> bool:
        cur = await self.conn.execute("SELECT pg_terminate_backend(%s)", [ident])
        row = await cur.fetchone()
        return bool(row and row[0])

    async def plain_read(self, sql: str) -> list[tuple] | None:
        cur = self.conn.cursor()
        try:
            await cur.execute(sql.encode())
            return _text_rows(cur)[1]
        except psycopg.Error:
            return None

    async def row_lock_holders(self, table: str, exclude: int) -> RowLockHolders:
        try:
            if self.have_pgrowlocks:
                cur = await self.conn.execute("SELECT pids FROM pgrowlocks(%s)", [table])
                rows = await cur.fetchall()
                pids = sorted({p for (pids,) in rows for p in (pids or ()) if p != exclude})
                count = sum(1 for (pids,) in rows if any(p != exclude for p in (pids or ())))
                return RowLockHolders(tuple(pids), count)
            cur = await self.conn.execute(
                "SELECT DISTINCT pid FROM pg_locks WHERE locktype = 'relation' AND relation = to_regclass(%s)"
                " AND granted AND mode IN ('RowShareLock', 'RowExclusiveLock') AND pid <> %s",
                [table, exclude],
            )
            return RowLockHolders(tuple(sorted(p for (p,) in await cur.fetchall())), None)
        except psycopg.Error:
            return RowLockHolders((), None)

    async def connected_idents(self, idents: list[int]) -> set[int]:
        cur = await self.conn.execute("SELECT pid FROM pg_stat_activity WHERE pid = ANY(%s)", [idents])
        return {pid for (pid,) in await cur.fetchall()}

    async def close(self) -> None:
        try:
            await self.conn.close()
        except psycopg.Error:
            pass


class PostgresBackend(Backend):
    engine = "postgres"
    flavor = "postgres"

    def __init__(self, target: Target):
        self.target = target
        self.sandbox = target.sandbox
        self.version = ""
        self.have_pgrowlocks = False

    async def _connect(self, app: str, search_path: bool = True) -> psycopg.AsyncConnection:
        kwargs = {"autocommit": True, "application_name": f"lockrace {app}"[:63], "connect_timeout": 5}
        if search_path:
            kwargs["options"] = f"-c search_path={self.sandbox}"
        try:
            conn = await psycopg.AsyncConnection.connect(self.target.conninfo, **kwargs)
        except psycopg.Error as exc:
            raise _connect_error(exc, self.target) from None
        except OSError as exc:
            raise _connect_error(exc, self.target) from None
        try:
            await conn.execute("SET lc_messages = 'C'")
        except psycopg.Error:
            pass  # not a superuser: messages stay in the server's language
        return conn

    async def open(self) -> "PostgresBackend":
        conn = await self._connect("setup", search_path=False)
        try:
            raw = conn.info.parameter_status("server_version") or ""
            self.version = raw.split()[0] if raw else str(conn.info.server_version)
            await conn.execute(pgsql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(pgsql.Identifier(self.sandbox)))
            if self.target.owned:
                try:
                    await conn.execute("CREATE EXTENSION IF NOT EXISTS pgrowlocks SCHEMA public")
                except psycopg.Error:
                    pass
            cur = await conn.execute("SELECT count(*) FROM pg_extension WHERE extname = 'pgrowlocks'")
            self.have_pgrowlocks = bool((await cur.fetchone())[0])
        finally:
            await conn.close()
        return self

    def _connect_blocking(self, app: str) -> psycopg.Connection:
        try:
            conn = psycopg.Connection.connect(
                self.target.conninfo, autocommit=True, application_name=f"lockrace {app}"[:63],
                connect_timeout=5, options=f"-c search_path={self.sandbox}",
            )
        except (psycopg.Error, OSError) as exc:
            raise _connect_error(exc, self.target) from None
        try:
            conn.execute("SET lc_messages = 'C'")
        except psycopg.Error:
            pass  # not a superuser: messages stay in the server's language
        return conn

    async def connect_session(self, name: str) -> PostgresSession:
        return PostgresSession(await anyio.to_thread.run_sync(self._connect_blocking, name), name)

    async def connect_monitor(self) -> PostgresMonitor:
        conn = await self._connect("monitor")
        if self.have_pgrowlocks:
            await conn.execute(pgsql.SQL("SET search_path = {}, public").format(pgsql.Identifier(self.sandbox)))
        return PostgresMonitor(conn, self.have_pgrowlocks)

    async def run_admin(self, sqls: list[str]) -> None:
        conn = await self._connect("setup")
        try:
            for text in sqls:
                if text.strip():
                    await conn.execute(text.encode())
        finally:
            await conn.close()

    async def reset_sandbox(self) -> None:
        conn = await self._connect("setup", search_path=False)
        try:
            ident = pgsql.Identifier(self.sandbox)
            await conn.execute(pgsql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(ident))
            await conn.execute(pgsql.SQL("CREATE SCHEMA {}").format(ident))
        finally:
            await conn.close()

    async def drop_sandbox(self) -> None:
        conn = await self._connect("setup", search_path=False)
        try:
            await conn.execute(pgsql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(pgsql.Identifier(self.sandbox)))
        finally:
            await conn.close()
