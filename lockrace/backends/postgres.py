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
from psycopg import pq, sql as pgsql

from ..engine.events import REPLAY_PROCESS, STANDBY_BUDGET, Budget, LockInfo, StatementResult
from ..engine.outcome import classify_postgres
from ..servers.target import Target, redact
from .base import Backend, ConnectError, MonitorConnection, RowLockHolders, SessionConnection, WaitReport

_BUDGET_GUCS = ("lock_timeout", "statement_timeout", "deadlock_timeout", "idle_in_transaction_session_timeout")
_BUDGETS_SQL = "SELECT " + ", ".join(f"current_setting('{g}')" for g in _BUDGET_GUCS)
# On a hot standby: how long replay waits for a query that holds it up before
# PostgreSQL cancels that query (a recovery conflict).
_STANDBY_BUDGET_SQL = f"SELECT CASE WHEN pg_is_in_recovery() THEN current_setting('{STANDBY_BUDGET}') END"

# Server processes that can hold a lock a session waits for, by backend_type.
_PROCESS_NAMES = {
    "startup": REPLAY_PROCESS,
    "autovacuum worker": "autovacuum",
}


def process_name(pid: int, backend_type: str) -> str:
    """How lockrace names a server process that is not one of its sessions."""
    name = _PROCESS_NAMES.get(backend_type)
    return name if name else f"{backend_type} (pid {pid})"
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
       {waited},
       (SELECT array_agg(b.pid || ':' || b.backend_type) FROM pg_stat_activity b
        WHERE b.pid = ANY(pg_blocking_pids(a.pid)) AND b.backend_type <> 'client backend')
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
        self.standby: bool | None = None  # connected to a hot standby (read with the budgets)
        conn.add_notice_handler(self._on_notice)

    def _on_notice(self, diag: psycopg.errors.Diagnostic) -> None:
        self.notices.append(f"{diag.severity_nonlocalized or diag.severity}:  {diag.message_primary}")

    @property
    def closed(self) -> bool:
        return self.conn.closed or self.conn.broken

    async def execute(self, sql: str) -> StatementResult:
        return await anyio.to_thread.run_sync(self._execute, sql)

    def _execute(self, sql: str) -> StatementResult:
        self.notices = []
        cur = self.conn.cursor()
        sets: list[StatementResult] = []
        t0 = perf_counter_ns()
        try:
            cur.execute(sql.encode("utf-8"))
            t1 = perf_counter_ns()
            while True:
                columns, rows = _text_rows(cur)
                sets.append(StatementResult(
                    "ok", columns=columns, rows=rows, has_rows=cur.description is not None,
                    tag=cur.statusmessage or "", rowcount=cur.rowcount,
                ))
                if not cur.nextset():
                    break
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
        finally:
            try:
                cur.close()
            except psycopg.Error:
                pass
        last = sets[-1]
        last.elapsed_ns = t1 - t0
        last.started_ns = t0
        last.notices = list(self.notices)
        last.result_sets = sets
        return last

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
            if self.standby is None:
                cur.execute(_STANDBY_BUDGET_SQL)
                self.standby = cur.fetchone()[0] is not None
            if self.standby:
                cur.execute(_STANDBY_BUDGET_SQL)
                row = (*row, cur.fetchone()[0])
        except psycopg.Error:
            return ()
        budgets = [Budget(g, _guc_ms(text)) for g, text in zip(_BUDGET_GUCS, row or ())]
        if self.standby and row and len(row) > len(_BUDGET_GUCS) and row[-1] is not None:
            # -1: replay waits for ever, shown like any budget that is off
            budgets.append(Budget(STANDBY_BUDGET, max(0.0, _guc_ms(row[-1]))))
        return tuple(budgets)

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
             trel, tpage, ttup, waiting_s, processes) in await cur.fetchall():
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
            names = {}
            for item in processes or ():
                ppid, _, kind = item.partition(":")
                names[int(ppid)] = process_name(int(ppid), kind)
            reports[pid] = WaitReport(pid, tuple(blockers or ()), lock, waiting_s, names)
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
        self.in_recovery = False  # a hot standby (read-only)

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
            cur = await conn.execute("SELECT pg_is_in_recovery()")
            self.in_recovery = bool((await cur.fetchone())[0])
            if self.in_recovery:
                # a hot standby is read-only: the sandbox comes from its primary by replication
                cur = await conn.execute("SELECT count(*) FROM pg_extension WHERE extname = 'pgrowlocks'")
                self.have_pgrowlocks = bool((await cur.fetchone())[0])
                return self
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
