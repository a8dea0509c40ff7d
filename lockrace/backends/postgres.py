"""PostgreSQL through psycopg 3: sessions on psycopg's blocking connections
(short answers read on the loop, long ones on the session's worker thread,
each timed send to arrival), the monitor and setup connections as
AsyncConnections on the caller's loop.

Values are read as the server's own text (``pgresult.get_value``), so a
transcript shows exactly what psql or isolationtester would show.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from time import perf_counter_ns
from typing import Any

import anyio.to_thread
import psycopg
from psycopg import capabilities, generators, pq, sql as pgsql
from psycopg.waiting import Wait

from ..core.events import REPLAY_PROCESS, ROW_LIMIT, STANDBY_BUDGET, Budget, LockInfo, StatementResult
from ..dialects.postgres import POSTGRES, classify_postgres
from ..core.states import TxnState
from ..servers.target import Target, pg_options, redact, standby_refused
from . import sandbox as sandbox_mod
from . import arrival
from .base import Backend, ConnectError, MonitorConnection, RowLockHolders, SessionConnection, WaitReport, refused_table
from .loop_answer import LoopAnswer, SocketWatch
from .worker import SessionThread
from ..core.rows import one

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
_NOTIFY_PAYLOAD = 200  # characters of a notification's payload kept
_GUC_UNITS_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "min": 60_000.0, "h": 3_600_000.0, "d": 86_400_000.0}
_GUC_TIME = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(us|ms|s|min|h|d)?\s*$")


COPY_REFUSED = ("COPY ... FROM STDIN / TO STDOUT needs a client-side data stream, which lockrace does not"
                " provide; the COPY was ended and the session is usable (use INSERT/SELECT, or COPY with a file"
                " on the server)")


def _guc_ms(text: str | None) -> float:
    """A time GUC as current_setting() shows it ('100ms', '2s', '1h', '0') in ms."""
    m = _GUC_TIME.match(text or "")
    if not m:
        return 0.0
    return float(m.group(1)) * _GUC_UNITS_MS[m.group(2) or "ms"]



def _key_value(text: str | None) -> str:
    if text is None:
        return "NULL"
    return text if re.fullmatch(r"-?\d+(\.\d+)?", text) else "'" + text.replace("'", "''") + "'"


def _connect_error(exc: Exception, target: Target) -> ConnectError:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    text = re.sub(r"^(connection failed|connection is bad): ", "", text)
    return ConnectError(f"cannot connect to PostgreSQL at {target.describe()}: {redact(text)}")


def _text_rows(cur) -> list[tuple]:
    """A cursor's rows as the server's own text (the monitor's plain reads)."""
    res = cur.pgresult
    if res is None or cur.description is None:
        return []
    return _res_rows(res, res.ntuples)


_MAX_NOTICES = 50
_CHUNK_ROWS = 1000  # rows per message batch while streaming (libpq 17+ chunked mode)
_CHUNKED = capabilities.has_stream_chunked()
_TS = pq.TransactionStatus
# libpq's transaction status (PQtransactionStatus): UNKNOWN once the connection is bad
_TXN_STATES = {int(_TS.IDLE): TxnState.IDLE, int(_TS.INTRANS): TxnState.IN_TRANSACTION,
               int(_TS.ACTIVE): TxnState.IN_TRANSACTION, int(_TS.INERROR): TxnState.FAILED_TRANSACTION}
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


class PostgresSession(SocketWatch, SessionConnection):
    """One session's connection: a plain psycopg connection (non-blocking libpq)
    whose short answers are read on the event loop and long ones on the
    session's own worker thread (see ``send``): a statement's elapsed time is
    the server's answer time, never stretched by the event loop being busy (the
    app's screen redraws can hold the loop for tens of ms)."""

    def __init__(self, conn: psycopg.Connection, name: str):
        self.conn = conn
        self.name = name
        self.ident = conn.info.backend_pid
        self.notices: list[str] = []
        self._copied = False  # the last statement line ran a COPY FROM STDIN / TO STDOUT (see _stream)
        self.standby: bool | None = None  # connected to a hot standby (read with the budgets)
        self._worker: SessionThread | None = None
        self._init_watch()
        conn.add_notice_handler(self._on_notice)
        # LISTEN: each notification is said (as psql says it) and dropped; with no handler
        # psycopg would keep every one in a backlog nobody reads
        conn.add_notify_handler(self._on_notify)

    def _on_notice(self, diag: psycopg.errors.Diagnostic) -> None:
        self._note(f"{diag.severity_nonlocalized or diag.severity}:  {diag.message_primary}")

    def _on_notify(self, n: psycopg.Notify) -> None:
        payload = n.payload if len(n.payload) <= _NOTIFY_PAYLOAD else n.payload[:_NOTIFY_PAYLOAD] + "…"
        self._note(f'Asynchronous notification "{n.channel}"' + (f' with payload "{payload}"' if n.payload else "")
                   + f" received from server process with PID {n.pid}.")

    def _note(self, line: str) -> None:
        if len(self.notices) >= _MAX_NOTICES:  # a RAISE NOTICE in a loop, a NOTIFY flood: keep the first ones
            if len(self.notices) == _MAX_NOTICES:
                self.notices.append("(more notices not kept)")
            return
        self.notices.append(line)

    @property
    def closed(self) -> bool:
        return self.conn.closed or self.conn.broken

    def send(self, sql: str, on_answer=None) -> asyncio.Future | None:
        """Send ``sql`` now, from the loop, and start reading its answer.  libpq in
        non-blocking mode only queues and writes the query: nothing here waits for
        the server.  A short answer is read on the event loop as soon as the socket
        turns readable, like a bare driver call (see ``_LoopRead``); a long one is
        handed to the session's thread.  Either way the statement is timed from
        here to its answer, never stretched by a busy loop (the app's screen
        redraws can hold it for tens of ms).  None when the connection is busy or
        closed (``execute`` then does it all on the thread, which says why), and
        with threaded reads (``Backend.reads``)."""
        if self.threaded or self.closed or not self.conn.lock.acquire(blocking=False):
            return None
        data = sql.encode("utf-8")
        try:
            loop = self._watching()  # before the send: an answer that comes at once is noted too
            t0 = perf_counter_ns()
            self._start(data)
            unsent = self.conn.pgconn.flush()
        except BaseException:
            self.conn.lock.release()
            return None
        # the connection's lock goes with the answer: whoever reads it to its end releases it
        if loop is None or unsent:
            # a query longer than the socket takes at once (the thread sends the rest), or
            # a loop that cannot note the answer's arrival (see arrival.py): the thread reads
            return self.thread().submit(self._execute, sql, data, t0)
        self.reading = reading = _LoopRead(self, sql, t0, loop, on_answer)
        return reading.future

    def _socket_fd(self) -> int | None:
        return self.conn.pgconn.socket

    def _start(self, data: bytes) -> None:
        """Put the query on its way (the connection's lock held)."""
        pgconn = self.conn.pgconn
        self.notices = []
        self._copied = False
        pgconn.send_query(data)
        if _CHUNKED:
            pgconn.set_chunked_rows_mode(_CHUNK_ROWS)
        else:
            pgconn.set_single_row_mode()

    async def execute(self, sql: str, sent: asyncio.Future | None = None) -> StatementResult:
        if sent is None:
            sent = self.send(sql)
        if sent is None:  # busy or closed: all of it on the thread, which says why
            sent = self.thread().submit(self._execute, sql, sql.encode("utf-8"), None)
        # the answer is read to its end even if the caller stops waiting for it: the
        # connection is never left with an unread answer
        return await sent

    def thread(self) -> SessionThread:
        if self._worker is None:
            self._worker = SessionThread(f"lockrace-{self.name}")
        return self._worker

    def _execute(self, sql: str, data: bytes, sent_ns: int | None, taken: tuple = ()) -> StatementResult:
        """On the session's thread: read the answer to ``data``, sent at ``sent_ns`` (None:
        send it first, here), and time it.  ``taken``: the answer's first results, read
        on the loop before it handed the rest over."""
        results = _Results()
        try:
            try:
                if sent_ns is None:
                    self.conn.lock.acquire()
                    t0 = perf_counter_ns()
                    self._start(data)
                else:
                    t0 = sent_ns
                self._stream(results, taken)
            finally:
                self.conn.lock.release()
            t1 = perf_counter_ns()
        except psycopg.Error as exc:
            t1 = perf_counter_ns()
            if not self._copied:
                return self._error_result(exc, sql, t0, results.sets, t1)
            # a failed COPY FROM STDIN answers 57014 "COPY from stdin failed": ours, said below
        return self._answer(results, sql, t0, t1)

    def _answer(self, results: "_Results", sql: str, t0: int, t1: int) -> StatementResult:
        sets = results.sets
        if results.error is not None and not self._copied:
            return self._server_error(results.error, sql, t0, sets, t1)
        if self._copied:
            # COPY ... FROM STDIN / TO STDOUT: the server waited for (or sent) a data
            # stream a statement line cannot carry; lockrace ended it (see _stream)
            return StatementResult("error", message=COPY_REFUSED, elapsed_ns=t1 - t0, started_ns=t0,
                                   notices=list(self.notices), result_sets=sets)
        if not sets:
            sets.append(StatementResult("ok"))
        last = sets[-1]
        last.elapsed_ns = t1 - t0
        last.started_ns = t0
        last.notices = list(self.notices)
        last.result_sets = sets
        return last

    def _stream(self, results: "_Results", taken: tuple = ()) -> None:
        """Read the results of the query on its way (one or several statements, simple
        query protocol) as the server streams them, in chunks: each result set keeps
        its first ROW_LIMIT rows and only counts the rest, so memory stays bounded
        whatever the size of the result.  A cancel from the monitor ends the stream
        with 57014."""
        conn, pgconn = self.conn, self.conn.pgconn
        conn.wait(generators.send(pgconn))  # whatever of the query is still unsent (a long one)
        for res in taken:
            self._take(results, res)
        try:
            while (res := conn.wait(generators.fetch(pgconn))) is not None:
                self._take(results, res)
        except psycopg.Error:
            if results.error is None:
                raise
            # the server said why before it closed the connection (FATAL 25P03, 57P01): that is the answer

    def _take(self, results: "_Results", res) -> None:
        status = res.status
        if status == pq.ExecStatus.COPY_IN:  # fail it: the server rolls the COPY back
            self._copied = True
            self.conn.pgconn.put_copy_end(COPY_REFUSED.encode())
            self.conn.wait(generators.send(self.conn.pgconn))
        elif status == pq.ExecStatus.COPY_OUT:  # read and drop what it sends
            self._copied = True
            self.conn.wait(_drain_copy(self.conn.pgconn))
        else:
            results.take(res)

    def _server_error(self, res, sql: str, t0: int, sets: list, t1: int) -> StatementResult:
        """The server's error result, read straight from libpq's result (no exception
        object: this is on the way to the caller)."""
        field = res.error_field
        sqlstate = _text(field(_SQLSTATE))
        message = _text(field(_MESSAGE_PRIMARY))
        if not message:
            text = _text(res.error_message).strip()
            message = text.splitlines()[0] if text else "error"
        return StatementResult(
            classify_postgres(sqlstate or None, message, sql, connection_closed=not sqlstate and self.closed),
            code=sqlstate, message=message, detail=_text(field(_MESSAGE_DETAIL)),
            severity=_text(field(_SEVERITY_NONLOCALIZED)) or _text(field(_SEVERITY)) or "ERROR",
            elapsed_ns=t1 - t0, started_ns=t0, notices=list(self.notices), result_sets=sets,
        )

    def _error_result(self, exc: psycopg.Error, sql: str, t0: int, sets: list, t1: int) -> StatementResult:
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

    async def txn_state(self) -> TxnState:
        return self.txn_state_now()

    def txn_state_now(self) -> TxnState:
        # libpq's own status, as a plain int: this is on the way to a caller (see Race._on_answer)
        return _TXN_STATES.get(self.conn.pgconn.transaction_status, TxnState.CLOSED)

    def _budgets(self) -> tuple[Budget, ...]:
        cur = self.conn.cursor()
        try:
            # current_setting() costs ~0.1 ms where the pg_settings view costs ~1.3 ms
            # (it builds every GUC): this runs after every SET, COMMIT and error.
            cur.execute(_BUDGETS_SQL)
            row = one(cur.fetchone())
            if self.standby is None:
                cur.execute(_STANDBY_BUDGET_SQL)
                self.standby = one(cur.fetchone())[0] is not None
            if self.standby:
                cur.execute(_STANDBY_BUDGET_SQL)
                row = (*row, one(cur.fetchone())[0])
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
        return await self.thread().submit(self._budgets)

    async def close(self) -> None:
        if self.reading is not None:
            self.reading.abandon()
        self.unwatch(arrivals=True)

        def close():
            try:
                self.conn.close()
            except psycopg.Error:
                pass

        await anyio.to_thread.run_sync(close)
        if self._worker is not None:
            self._worker.stop()


class _Results:
    """The result sets of one answer, taken one libpq result at a time."""

    __slots__ = ("sets", "error", "_columns", "_rows", "_count", "_tag")

    def __init__(self):
        self.sets: list[StatementResult] = []
        self.error = None  # the first error's PGresult: the server runs nothing after it
        self._columns: list[str] | None = None
        self._rows: list[tuple] = []
        self._count = 0
        self._tag = b""

    def take(self, res) -> None:
        status = res.status
        if status in (_SINGLE_TUPLE, _TUPLES_CHUNK, _TUPLES_OK):
            if self._columns is None:
                self._columns = [res.fname(c).decode() for c in range(res.nfields)]
            n = res.ntuples
            if n and len(self._rows) < ROW_LIMIT:
                self._rows.extend(_res_rows(res, min(n, ROW_LIMIT - len(self._rows))))
            self._count += n
            self._tag = res.command_status or self._tag  # on the last chunk or on the closing result
            if status == _TUPLES_OK:  # the end of one result set
                self.sets.append(StatementResult(
                    "ok", columns=self._columns, rows=self._rows, has_rows=True, row_count=self._count,
                    rowcount=self._count, tag=self._tag.decode("utf-8", "replace"),
                ))
                self._columns, self._rows, self._count, self._tag = None, [], 0, b""
        elif status in (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.EMPTY_QUERY):
            tuples = res.command_tuples
            self.sets.append(StatementResult(
                "ok", tag=(res.command_status or b"").decode("utf-8", "replace"),
                rowcount=tuples if tuples is not None else -1,
            ))
        elif self.error is None:
            self.error = res


_DF = pq.DiagnosticField
_SQLSTATE, _MESSAGE_PRIMARY, _MESSAGE_DETAIL = _DF.SQLSTATE, _DF.MESSAGE_PRIMARY, _DF.MESSAGE_DETAIL
_SEVERITY, _SEVERITY_NONLOCALIZED = _DF.SEVERITY, _DF.SEVERITY_NONLOCALIZED


def _text(value: bytes | None) -> str:
    return value.decode("utf-8", "replace") if value else ""


_LOOP_RESULTS = 64  # an answer of more results than this is read on the session's thread
_COPY = (pq.ExecStatus.COPY_IN, pq.ExecStatus.COPY_OUT)
_FATAL_ERROR = pq.ExecStatus.FATAL_ERROR


class _LoopRead(LoopAnswer):
    """One answer read on the event loop, which the socket wakes as it would a
    bare driver call: a short answer (an error, a command's tag, a few rows) is
    in the caller's hands with no thread hop.  Nothing here blocks: libpq only
    parses what has arrived.

    The statement's time ends when the answer arrived (see
    arrival.py), not when the loop got round to it: a busy loop does not
    stretch it.  An answer that is still incomplete once it has results (rows
    streaming in, statements still running, a COPY) is handed to the session's
    thread, which reads and times the rest."""

    __slots__ = ("session", "sql", "t0", "taken", "decided_ns", "looked_ns", "answer")

    def __init__(self, session: PostgresSession, sql: str, t0: int, loop: asyncio.AbstractEventLoop, on_answer=None):
        super().__init__(loop, on_answer)
        self.session, self.sql, self.t0 = session, sql, t0
        self.taken: list = []
        self.decided_ns: int | None = None  # an error read, its ReadyForQuery still to come
        self.looked_ns = t0  # the last look (arrivals before it were read then)
        self.answer: StatementResult | None = None

    def readable(self) -> None:
        now = perf_counter_ns()
        seen = arrival.take(self.session.arrival_signal)  # what this look reads arrived then
        if self.looked_ns < seen < now:
            self.looked_ns, now = now, seen
        else:
            self.looked_ns = now
        pgconn = self.session.conn.pgconn
        try:
            pgconn.consume_input()
            while not pgconn.is_busy():
                res = pgconn.get_result()
                if res is None:
                    self._finish(now)
                    return
                self.taken.append(res)
                if res.status in _COPY or len(self.taken) > _LOOP_RESULTS:
                    self._hand_over()
                    return
                if res.status == _FATAL_ERROR and self.decided_ns is None:
                    self.decided_ns = now  # only ReadyForQuery follows an error
            if self.decided_ns is None:
                if self.taken:
                    self._hand_over()  # a longer answer under way
            elif self.answer is None:
                # the error is in, its ReadyForQuery still to come (the server first ends the
                # transaction or statement): the answer is made ready meanwhile
                self.answer = self._build(self.decided_ns)
                self._tell(self.answer, final=False)
        except BaseException as exc:  # a lost connection, or a bug: never left to the loop
            self._fail(exc, now)

    def _build(self, t1: int) -> StatementResult:
        taken = self.taken
        if len(taken) == 1 and taken[0].status == _FATAL_ERROR and not self.session._copied:
            return self.session._server_error(taken[0], self.sql, self.t0, [], t1)  # the usual refusal
        results = _Results()
        for res in self.taken:
            results.take(res)
        return self.session._answer(results, self.sql, self.t0, t1)

    def _finish(self, now: int) -> None:
        answer = self.answer or self._build(now if self.decided_ns is None else self.decided_ns)
        self.session.reading = None
        self.session.conn.lock.release()
        self._settle(answer)

    def _hand_over(self) -> None:
        session = self.session
        session.reading = None
        rest = session.thread().submit(session._execute, self.sql, b"", self.t0, tuple(self.taken))
        rest.add_done_callback(self._from_thread)

    def _fail(self, exc: BaseException, now: int) -> None:
        session = self.session
        session.reading = None
        session.unwatch()
        results = _Results()
        with contextlib.suppress(Exception):
            for res in self.taken:
                results.take(res)
        session.conn.lock.release()
        if results.error is not None:  # the server said why before it closed the connection
            result = session._answer(results, self.sql, self.t0, now)
        elif isinstance(exc, psycopg.Error):
            result = session._error_result(exc, self.sql, self.t0, results.sets, now)
        else:
            result = StatementResult("error", message=f"{type(exc).__name__}: {exc}", started_ns=self.t0,
                                     elapsed_ns=now - self.t0)
        self._settle(result)

    def abandon(self) -> None:
        """The session closes while its answer is still awaited."""
        self.session.reading = None
        self.session.conn.lock.release()
        self._settle(StatementResult("connection_lost", message="the session was closed"))



class PostgresMonitor(MonitorConnection):
    def __init__(self, conn: psycopg.AsyncConnection, have_pgrowlocks: bool):
        self.conn = conn
        self.ident = conn.info.backend_pid
        self.have_pgrowlocks = have_pgrowlocks
        # the newest variant this server version has (pg_locks.waitstart exists from PostgreSQL 14 on)
        self._waits_sql = POSTGRES.lock_view("waits", conn.info.server_version)
        self._rows: dict[int, tuple[tuple[str, str], str]] = {}  # pid -> ((table, ctid), row name)
        self._keys: dict[str, list[str]] = {}  # table -> primary key columns

    @property
    def closed(self) -> bool:
        return self.conn.closed or self.conn.broken

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
                lock = LockInfo("tuple", mode or "", rel or "", await self._row_name(pid, rel, page, tup))
            elif locktype == "transactionid":
                # a row lock: the waiter holds the tuple lock and waits for the holder's xid
                detail = await self._row_name(pid, trel, tpage, ttup) if trel else f"xid {xid}"
                lock = LockInfo("tuple" if trel else "transactionid", mode or "", trel or "", detail)
            elif locktype:
                lock = LockInfo(locktype, mode or "", rel or "", "")
            names = {}
            for item in processes or ():
                ppid, _, kind = item.partition(":")
                names[int(ppid)] = process_name(int(ppid), kind)
            reports[pid] = WaitReport(pid, tuple(blockers or ()), lock, waiting_s, names)
        for pid in [p for p in self._rows if p not in reports]:
            del self._rows[pid]  # that wait is over: its row is named afresh next time
        return reports

    async def _row_name(self, pid: int, rel: str, page: int, tup: int) -> str:
        """The waited-on row by its primary key ('id=1'), read at its ctid; the ctid
        ('0,4') when the table has no primary key or the row cannot be read.  Once per
        wait: a ctid names another row after an UPDATE, its key does not."""
        ctid = f"{page},{tup}"
        seen = self._rows.get(pid)
        if seen is not None and seen[0] == (rel, ctid):
            return seen[1]
        name = ctid
        try:
            # bounded: a pending ACCESS EXCLUSIVE on the table must not stall the monitor
            async with self.conn.transaction():
                await self.conn.execute("SET LOCAL lock_timeout = '50ms'; SET LOCAL statement_timeout = '500ms'")
                cols = await self._key_columns(rel)
                row = None
                if cols:
                    query = pgsql.SQL("SELECT {} FROM {} WHERE ctid = %s::tid").format(
                        pgsql.SQL(", ").join(pgsql.SQL("{}::text").format(pgsql.Identifier(c)) for c in cols),
                        pgsql.SQL(rel))  # rel is the server's own regclass text, quoted where needed
                    cur = await self.conn.execute(query, [f"({ctid})"])
                    row = await cur.fetchone()
            if row is not None:
                name = ", ".join(f"{c}={_key_value(v)}" for c, v in zip(cols, row))
        except psycopg.Error:
            pass
        self._rows[pid] = ((rel, ctid), name)
        return name

    async def _key_columns(self, rel: str) -> list[str]:
        if rel not in self._keys:
            cur = await self.conn.execute(
                "SELECT a.attname FROM pg_index i CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY k(attnum, n)"
                " JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum"
                " WHERE i.indrelid = %s::regclass AND i.indisprimary ORDER BY k.n", [rel])
            self._keys[rel] = [name for (name,) in await cur.fetchall()]
        return self._keys[rel]

    async def cancel(self, ident: int) -> bool:
        cur = await self.conn.execute("SELECT pg_cancel_backend(%s)", [ident])
        row = await cur.fetchone()
        return bool(row and row[0])

    async def terminate(self, ident: int) -> bool:
        cur = await self.conn.execute("SELECT pg_terminate_backend(%s)", [ident])
        row = await cur.fetchone()
        return bool(row and row[0])

    async def plain_read(self, sql: str) -> list[tuple] | None:
        """A read of the user's (a SKIP LOCKED read without its locking clause): in a
        read-only transaction that is rolled back, under the monitor's own
        statement_timeout, so that it can change nothing."""
        try:
            async with self.conn.transaction(force_rollback=True):
                await self.conn.execute("SET TRANSACTION READ ONLY")
                cur = self.conn.cursor()
                await cur.execute(sql.encode())
                return _text_rows(cur)
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
                " AND granted AND mode IN ('RowShareLock', 'RowExclusiveLock') AND pid <> %s"
                # a session that only waits for a row holds RowShareLock too: not a holder
                " AND cardinality(pg_blocking_pids(pid)) = 0",
                [table, exclude],
            )
            return RowLockHolders(tuple(sorted(p for (p,) in await cur.fetchall())), None)
        except psycopg.Error:
            return RowLockHolders((), None)

    async def refusal_holders(self, sql: str, message: str, exclude: int) -> tuple[int, ...] | None:
        if "lock on row" in (message or "") or "lock on relation" not in (message or ""):
            return await super().refusal_holders(sql, message, exclude)
        table = refused_table(sql, message)  # LOCK TABLE ... NOWAIT: whoever holds a lock on the table
        try:
            cur = await self.conn.execute(
                "SELECT DISTINCT pid FROM pg_locks WHERE locktype = 'relation' AND relation = to_regclass(%s)"
                " AND granted AND pid <> %s ORDER BY pid", [table, exclude])
            return tuple(p for (p,) in await cur.fetchall())
        except psycopg.Error:
            return None

    async def close(self) -> None:
        try:
            await self.conn.close()
        except psycopg.Error:
            pass


# Objects outside schema %s that depend on objects in it (pg_depend): a view over one
# of its tables, a foreign key to one, a column or function of one of its types, a
# default using one of its sequences, a partition of one of its tables, ...  Internal
# dependencies (a table's TOAST table, its row type) go with their owner.  A rule is
# named by its view.  Unknown kinds of objects count as outside.
_FOREIGN_DEPENDENTS_SQL = (
    'WITH s AS (SELECT oid FROM pg_namespace WHERE nspname = %s),\n'
    'inside(classid, objid) AS (\n'
    "  SELECT 'pg_namespace'::regclass::oid, oid FROM s\n"
    "  UNION ALL SELECT 'pg_class'::regclass, c.oid FROM pg_class c, s WHERE c.relnamespace = s.oid\n"
    "  UNION ALL SELECT 'pg_type'::regclass, t.oid FROM pg_type t, s WHERE t.typnamespace = s.oid\n"
    "  UNION ALL SELECT 'pg_proc'::regclass, p.oid FROM pg_proc p, s WHERE p.pronamespace = s.oid\n"
    "  UNION ALL SELECT 'pg_constraint'::regclass, k.oid FROM pg_constraint k, s WHERE k.connamespace = s.oid\n"
    "  UNION ALL SELECT 'pg_operator'::regclass, o.oid FROM pg_operator o, s WHERE o.oprnamespace = s.oid\n"
    "  UNION ALL SELECT 'pg_collation'::regclass, o.oid FROM pg_collation o, s WHERE o.collnamespace = s.oid\n"
    "  UNION ALL SELECT 'pg_opfamily'::regclass, o.oid FROM pg_opfamily o, s WHERE o.opfnamespace = s.oid\n"
    "  UNION ALL SELECT 'pg_opclass'::regclass, o.oid FROM pg_opclass o, s WHERE o.opcnamespace = s.oid\n"
    "  UNION ALL SELECT 'pg_ts_config'::regclass, o.oid FROM pg_ts_config o, s WHERE o.cfgnamespace = s.oid\n"
    "  UNION ALL SELECT 'pg_ts_dict'::regclass, o.oid FROM pg_ts_dict o, s WHERE o.dictnamespace = s.oid\n"
    "  UNION ALL SELECT 'pg_conversion'::regclass, o.oid FROM pg_conversion o, s WHERE o.connamespace = s.oid\n"
    "  UNION ALL SELECT 'pg_extension'::regclass, o.oid FROM pg_extension o, s WHERE o.extnamespace = s.oid\n"
    '),\n'
    'dependents AS (\n'
    "  SELECT DISTINCT CASE WHEN d.classid = 'pg_rewrite'::regclass THEN 'pg_class'::regclass::oid ELSE d.classid END AS classid,\n"
    "    CASE WHEN d.classid = 'pg_rewrite'::regclass THEN (SELECT ev_class FROM pg_rewrite WHERE oid = d.objid) ELSE d.objid END AS objid,\n"
    "    CASE WHEN d.classid = 'pg_rewrite'::regclass THEN 0 ELSE d.objsubid END AS objsubid,\n"
    '    CASE d.classid\n'
    "      WHEN 'pg_class'::regclass THEN (SELECT relnamespace FROM pg_class WHERE oid = d.objid)\n"
    "      WHEN 'pg_type'::regclass THEN (SELECT typnamespace FROM pg_type WHERE oid = d.objid)\n"
    "      WHEN 'pg_proc'::regclass THEN (SELECT pronamespace FROM pg_proc WHERE oid = d.objid)\n"
    "      WHEN 'pg_constraint'::regclass THEN (SELECT connamespace FROM pg_constraint WHERE oid = d.objid)\n"
    "      WHEN 'pg_rewrite'::regclass THEN (SELECT c.relnamespace FROM pg_rewrite r JOIN pg_class c ON c.oid = r.ev_class WHERE r.oid = d.objid)\n"
    "      WHEN 'pg_attrdef'::regclass THEN (SELECT c.relnamespace FROM pg_attrdef a JOIN pg_class c ON c.oid = a.adrelid WHERE a.oid = d.objid)\n"
    "      WHEN 'pg_trigger'::regclass THEN (SELECT c.relnamespace FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid WHERE t.oid = d.objid)\n"
    "      WHEN 'pg_policy'::regclass THEN (SELECT c.relnamespace FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid WHERE p.oid = d.objid)\n"
    "      WHEN 'pg_statistic_ext'::regclass THEN (SELECT stxnamespace FROM pg_statistic_ext WHERE oid = d.objid)\n"
    "      WHEN 'pg_operator'::regclass THEN (SELECT oprnamespace FROM pg_operator WHERE oid = d.objid)\n"
    "      WHEN 'pg_collation'::regclass THEN (SELECT collnamespace FROM pg_collation WHERE oid = d.objid)\n"
    "      WHEN 'pg_opfamily'::regclass THEN (SELECT opfnamespace FROM pg_opfamily WHERE oid = d.objid)\n"
    "      WHEN 'pg_opclass'::regclass THEN (SELECT opcnamespace FROM pg_opclass WHERE oid = d.objid)\n"
    "      WHEN 'pg_amop'::regclass THEN (SELECT f.opfnamespace FROM pg_amop a JOIN pg_opfamily f ON f.oid = a.amopfamily WHERE a.oid = d.objid)\n"
    "      WHEN 'pg_amproc'::regclass THEN (SELECT f.opfnamespace FROM pg_amproc a JOIN pg_opfamily f ON f.oid = a.amprocfamily WHERE a.oid = d.objid)\n"
    "      WHEN 'pg_ts_config'::regclass THEN (SELECT cfgnamespace FROM pg_ts_config WHERE oid = d.objid)\n"
    "      WHEN 'pg_ts_dict'::regclass THEN (SELECT dictnamespace FROM pg_ts_dict WHERE oid = d.objid)\n"
    "      WHEN 'pg_conversion'::regclass THEN (SELECT connamespace FROM pg_conversion WHERE oid = d.objid)\n"
    "      WHEN 'pg_extension'::regclass THEN (SELECT extnamespace FROM pg_extension WHERE oid = d.objid)\n"
    '    END AS nsp\n'
    '  FROM pg_depend d JOIN inside i ON d.refclassid = i.classid AND d.refobjid = i.objid\n'
    "  WHERE d.deptype <> 'i'\n"
    ')\n'
    "SELECT (SELECT type || ' ' || identity FROM pg_identify_object(classid, objid, objsubid)) FROM dependents, s\n"
    'WHERE nsp IS DISTINCT FROM s.oid ORDER BY 1')


class PostgresBackend(Backend):
    family = "postgres"
    flavor = "postgres"

    def __init__(self, target: Target):
        self.target = target
        self.sandbox = target.sandbox
        self.version = ""
        self.server_version = 0
        self.have_pgrowlocks = False
        self.token = sandbox_mod.new_token()
        self.owner: psycopg.Connection | None = None  # holds the sandbox's advisory lock (DSN servers)
        # every connection of this run carries the sandbox in its application_name, so that a
        # later run can tell (and end) the backends of a run that is gone
        self.app_prefix = "lockrace " if target.owned else f"lockrace {self.sandbox} "
        self.in_recovery = False  # a hot standby (read-only)

    def _app(self, app: str) -> str:
        return f"{self.app_prefix}{app}"[:63]

    def _budget_options(self, app: str, bounded: bool) -> list[str]:
        """Server-side bounds on lockrace's own connections: sandbox DDL, setup and
        teardown never wait long behind another client's lock and end after the
        step timeout; the monitor's reads (skip counts) never wait long on a lock."""
        if bounded:
            admin_ms = max(1, int(self.admin_timeout * 1000))
            return [f"-c lock_timeout={min(sandbox_mod.DDL_LOCK_WAIT_S * 1000, admin_ms)}",
                    f"-c statement_timeout={admin_ms}"]
        if app == "monitor":
            return ["-c lock_timeout=1000", "-c statement_timeout=5000"]
        return []

    async def _connect(self, app: str, search_path: bool = True, bounded: bool = False) -> psycopg.AsyncConnection:
        kwargs: dict[str, Any] = {"autocommit": True, "application_name": self._app(app), "connect_timeout": 5}
        options = self._budget_options(app, bounded)
        if search_path:
            options.insert(0, f"-c search_path={self.sandbox}")
        kwargs["options"] = pg_options(self.target.conninfo, *options)
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
        conn = await self._connect("setup", search_path=False, bounded=True)
        try:
            raw = conn.info.parameter_status("server_version") or ""
            self.version = raw.split()[0] if raw else str(conn.info.server_version)
            self.server_version = conn.info.server_version
            cur = await conn.execute("SELECT pg_is_in_recovery()")
            self.in_recovery = bool(one(await cur.fetchone())[0])
            if self.in_recovery and not self.target.hot_standby:
                raise ConnectError(standby_refused(self.target.describe()))
            if self.in_recovery:
                # a hot standby is read-only: the sandbox comes from its primary by replication
                cur = await conn.execute("SELECT count(*) FROM pg_extension WHERE extname = 'pgrowlocks'")
                self.have_pgrowlocks = bool(one(await cur.fetchone())[0])
                return self
            if self.target.owned:
                await conn.execute(pgsql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(pgsql.Identifier(self.sandbox)))
                try:
                    await conn.execute("CREATE EXTENSION IF NOT EXISTS pgrowlocks SCHEMA public")
                except psycopg.Error:
                    pass
            elif not self.target.joins:
                await self._claim(conn)
            cur = await conn.execute("SELECT count(*) FROM pg_extension WHERE extname = 'pgrowlocks'")
            self.have_pgrowlocks = bool(one(await cur.fetchone())[0])
        finally:
            await conn.close()
        return self

    # ------------------------------------------------------------ the sandbox on a DSN server

    def _owner_connect(self) -> psycopg.Connection:
        """The connection that holds the sandbox's advisory lock while this run lives."""
        conn = self.connect_blocking("owner", search_path=False)
        for setting in ("idle_session_timeout", "idle_in_transaction_session_timeout"):
            try:
                conn.execute(pgsql.SQL("SET {} = 0").format(pgsql.Identifier(setting)))
            except psycopg.Error:
                pass  # idle_session_timeout: PostgreSQL 14 on
        key = sandbox_mod.advisory_key(self.sandbox)
        if not one(conn.execute("SELECT pg_try_advisory_lock(%s::int4, %s::int4)", key).fetchone())[0]:
            comment = one(conn.execute("SELECT obj_description(to_regnamespace(%s), 'pg_namespace')",
                                       [self.sandbox]).fetchone())[0]
            conn.close()
            raise sandbox_mod.refuse_existing("schema", self.sandbox, comment or sandbox_mod.MARK, True)
        return conn

    async def _ensure_owner(self) -> None:
        if self.target.owned:
            return
        if self.owner is None or self.owner.closed or self.owner.broken:
            self.owner = await anyio.to_thread.run_sync(self._owner_connect)

    async def _check_owner(self, conn: psycopg.AsyncConnection) -> None:
        """Take the sandbox's lock again if our owner connection lost it (someone ended it)."""
        key = sandbox_mod.advisory_key(self.sandbox)
        cur = await conn.execute("SELECT pg_try_advisory_lock(%s::int4, %s::int4)", key)
        if not one(await cur.fetchone())[0]:
            return  # held: by our owner connection
        await conn.execute("SELECT pg_advisory_unlock(%s::int4, %s::int4)", key)
        old, self.owner = self.owner, None
        if old is not None:
            await anyio.to_thread.run_sync(old.close)
        await self._ensure_owner()

    async def _claim(self, conn: psycopg.AsyncConnection) -> None:
        """Take the sandbox name, sweep sandboxes of runs that are gone, create ours."""
        await self._ensure_owner()
        try:
            await self._sweep(conn)
            await self._create(conn)
        except BaseException:
            owner, self.owner = self.owner, None  # the name is not ours after all: let it go
            if owner is not None:
                await anyio.to_thread.run_sync(owner.close)
            raise

    async def _comment(self, conn: psycopg.AsyncConnection, name: str) -> tuple[bool, str | None]:
        """(the schema exists, its comment)."""
        cur = await conn.execute(
            "SELECT obj_description(n.oid, 'pg_namespace') FROM pg_namespace n WHERE n.nspname = %s", [name])
        row = await cur.fetchone()
        return (row is not None, row[0] if row else None)

    async def _create(self, conn: psycopg.AsyncConnection) -> None:
        ident = pgsql.Identifier(self.sandbox)
        try:
            async with conn.transaction():
                await conn.execute(pgsql.SQL("CREATE SCHEMA {}").format(ident))
                await conn.execute(pgsql.SQL("COMMENT ON SCHEMA {} IS {}").format(
                    ident, pgsql.Literal(sandbox_mod.marker(self.token))))
        except psycopg.errors.DuplicateSchema:
            _, comment = await self._comment(conn, self.sandbox)
            raise sandbox_mod.refuse_existing("schema", self.sandbox, comment, False) from None
        except psycopg.Error as exc:
            raise sandbox_mod.SandboxError(
                f"cannot create the sandbox schema {self.sandbox}: {_first_line(exc)}") from None

    async def _end_leftovers(self, conn: psycopg.AsyncConnection, name: str, prefix: str | None) -> None:
        """End what keeps locks in sandbox ``name`` of a run that is over: its backends
        (known by their application_name ``prefix``) and prepared transactions holding locks in it."""
        if prefix:
            await self._end_backends(conn, prefix)
        for gid in await self._prepared_in(conn, name):
            try:
                await conn.execute(pgsql.SQL("ROLLBACK PREPARED {}").format(pgsql.Literal(gid)))
            except psycopg.Error:
                pass

    @staticmethod
    async def _prepared_in(conn: psycopg.AsyncConnection, name: str) -> list[str]:
        """Prepared transactions (they outlive their session) holding locks in schema ``name``.

        A prepared transaction's locks have no pid; they share its virtual transaction
        with the lock on its own transaction id."""
        cur = await conn.execute(
            "SELECT DISTINCT p.gid FROM pg_prepared_xacts p"
            " JOIN pg_locks x ON x.locktype = 'transactionid' AND x.transactionid = p.transaction AND x.pid IS NULL"
            " JOIN pg_locks l ON l.virtualtransaction = x.virtualtransaction AND l.pid IS NULL"
            "  AND l.locktype = 'relation'"
            " JOIN pg_class c ON c.oid = l.relation"
            " WHERE p.database = current_database()"
            " AND c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = %s)", [name])
        return [gid for (gid,) in await cur.fetchall()]

    async def _end_backends(self, conn: psycopg.AsyncConnection, prefix: str) -> None:
        mine = [self.owner.info.backend_pid] if self.owner is not None and not self.owner.closed else []
        cur = await conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
            " AND pid <> ALL(%s::int[]) AND left(application_name, %s) = %s", [mine, len(prefix), prefix])
        pids = [pid for (pid,) in await cur.fetchall()]
        for pid in pids:
            try:
                await conn.execute("SELECT pg_terminate_backend(%s)", [pid])
            except psycopg.Error:
                pass  # another role's backend and no pg_signal_backend: the DROP below says what blocks
        for _ in range(50):  # pg_terminate_backend only signals: wait (up to 1 s) until they are gone
            if not pids:
                break
            cur = await conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", [pids])
            if not one(await cur.fetchone())[0]:
                break
            await asyncio.sleep(0.02)

    async def _sweep(self, conn: psycopg.AsyncConnection) -> None:
        """Drop marked sandboxes (in this database) whose owner is provably gone: its lock is free."""
        cur = await conn.execute(
            "SELECT n.nspname, d.description FROM pg_namespace n"
            " JOIN pg_description d ON d.objoid = n.oid AND d.classoid = 'pg_namespace'::regclass AND d.objsubid = 0"
            " WHERE left(d.description, %s) = %s ORDER BY 1", [len(sandbox_mod.MARK), sandbox_mod.MARK])
        for name, _comment in await cur.fetchall():
            key = sandbox_mod.advisory_key(name)
            mine = name == self.sandbox  # our owner connection holds this key already
            if not mine:
                cur = await conn.execute("SELECT pg_try_advisory_lock(%s::int4, %s::int4)", key)
                if not one(await cur.fetchone())[0]:
                    continue  # its owner is alive
            try:
                await self._end_leftovers(conn, name, f"lockrace {name} ")
                await conn.execute(f"SET lock_timeout = '{sandbox_mod.SWEEP_LOCK_WAIT_S}s'")
                # another client's object depending on something in it: left for a later run
                await self._drop_schema(conn, name, None)
            except psycopg.Error:
                pass  # another client holds a lock in it: left for a later run
            finally:
                try:
                    await conn.execute(f"SET lock_timeout = '{sandbox_mod.DDL_LOCK_WAIT_S}s'")
                    if not mine:
                        await conn.execute("SELECT pg_advisory_unlock(%s::int4, %s::int4)", key)
                except psycopg.Error:
                    pass

    async def _blockers(self, conn: psycopg.AsyncConnection) -> str:
        """Who (other than this run) holds locks in the sandbox, as 'pid 12 (psql)'."""
        try:
            cur = await conn.execute(
                "SELECT DISTINCT a.pid, a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
                " LEFT JOIN pg_class c ON c.oid = l.relation"
                " WHERE l.granted AND l.pid <> pg_backend_pid()"
                " AND (c.relnamespace = to_regnamespace(%s)"
                "      OR (l.locktype = 'object' AND l.classid = 'pg_namespace'::regclass"
                "          AND l.objid = to_regnamespace(%s)))"
                " ORDER BY 1", [self.sandbox, self.sandbox])
            rows = await cur.fetchall()
            prepared = await self._prepared_in(conn, self.sandbox)
        except psycopg.Error:
            return ""
        who = [f"pid {pid}" + (f" ({app})" if app else "") for pid, app in rows]
        return ", ".join(who + [f"prepared transaction '{gid}'" for gid in prepared])

    @staticmethod
    async def _foreign_dependents(conn: psycopg.AsyncConnection, name: str) -> list[str]:
        """Objects outside schema ``name`` that depend on objects in it, as 'view public.v'."""
        cur = await conn.execute(_FOREIGN_DEPENDENTS_SQL, [name])
        return [what for (what,) in await cur.fetchall()]

    async def _drop_schema(self, conn: psycopg.AsyncConnection, name: str, marker: str | None) -> list[str]:
        """Drop schema ``name`` (and create it again, marked ``marker``) in one transaction,
        unless an object outside it depends on an object in it: then nothing is dropped
        and those objects are returned.  Every relation in it is locked before the
        check, so no view or foreign key on them can be added until the drop; CASCADE
        then reaches only objects inside the schema."""
        ident = pgsql.Identifier(name)
        async with conn.transaction():
            cur = await conn.execute(
                "SELECT c.relname FROM pg_class c WHERE c.relnamespace = to_regnamespace(%s)"
                " AND c.relkind IN ('r', 'p', 'v', 'm', 'f') ORDER BY 1", [name])
            relations = [pgsql.Identifier(name, rel) for (rel,) in await cur.fetchall()]
            if relations:
                await conn.execute(pgsql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(
                    pgsql.SQL(", ").join(relations)))
            dependents = await self._foreign_dependents(conn, name)
            if dependents:
                return dependents
            await conn.execute(pgsql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(ident))
            if marker is not None:
                await conn.execute(pgsql.SQL("CREATE SCHEMA {}").format(ident))
                await conn.execute(pgsql.SQL("COMMENT ON SCHEMA {} IS {}").format(ident, pgsql.Literal(marker)))
        return []

    async def _sandbox_ddl(self, what: str, recreate: bool) -> None:
        """Drop (and recreate) our own sandbox; bounded, with a clear sentence when it cannot."""
        conn = await self._connect("setup", search_path=False, bounded=True)
        try:
            if what != "drop":
                await self._check_owner(conn)
            exists, comment = await self._comment(conn, self.sandbox)
            if exists and sandbox_mod.token_of(comment) != self.token:
                raise sandbox_mod.SandboxError(
                    f"schema {self.sandbox} is no longer this run's sandbox ({sandbox_mod.owner_text(comment)});"
                    f" lockrace leaves it alone")
            if exists:
                await self._end_leftovers(conn, self.sandbox, None)  # this run's prepared transactions
            try:
                dependents = await self._drop_schema(
                    conn, self.sandbox, sandbox_mod.marker(self.token) if recreate else None)
            except psycopg.errors.LockNotAvailable:
                who = await self._blockers(conn)
                raise sandbox_mod.SandboxError(
                    f"could not {what} the sandbox schema {self.sandbox}: another client holds a lock in it"
                    + (f" ({who})" if who else "") + f" and lockrace waits at most {sandbox_mod.DDL_LOCK_WAIT_S} s;"
                    " the schema is left in place (a later lockrace run removes it once that lock is gone)") from None
            except psycopg.errors.QueryCanceled:
                raise sandbox_mod.SandboxError(
                    f"could not {what} the sandbox schema {self.sandbox} within {self.admin_timeout:g} s;"
                    " the schema is left in place") from None
            if dependents:
                raise sandbox_mod.SandboxError(sandbox_mod.foreign_dependents(
                    what, "schema", self.sandbox, dependents))
        finally:
            await conn.close()

    # ------------------------------------------------------------ connections

    def connect_blocking(self, app: str, search_path: bool = True) -> psycopg.Connection:
        options = [f"-c search_path={self.sandbox}"] if search_path else []
        if not self.target.owned and self.server_version >= 140000:
            # a backend waiting on a lock notices within a second that lockrace is gone
            options.append("-c client_connection_check_interval=1000")
        try:
            conn = psycopg.Connection.connect(
                self.target.conninfo, autocommit=True, application_name=self._app(app),
                connect_timeout=5, options=pg_options(self.target.conninfo, *options),
            )
        except (psycopg.Error, OSError) as exc:
            raise _connect_error(exc, self.target) from None
        try:
            conn.execute("SET lc_messages = 'C'")
        except psycopg.Error:
            pass  # not a superuser: messages stay in the server's language
        return conn

    async def connect_session(self, name: str) -> PostgresSession:
        threaded = self.threaded_reads()
        session = PostgresSession(await anyio.to_thread.run_sync(self.connect_blocking, name), name)
        session.threaded = threaded
        return session

    async def connect_monitor(self) -> PostgresMonitor:
        conn = await self._connect("monitor")
        if self.have_pgrowlocks:
            await conn.execute(pgsql.SQL("SET search_path = {}, public").format(pgsql.Identifier(self.sandbox)))
        return PostgresMonitor(conn, self.have_pgrowlocks)

    async def run_admin(self, sqls: list[str]) -> None:
        conn = await self._connect("setup", bounded=True)
        try:
            for text in sqls:
                if text.strip():
                    # statement_timeout bounds it on the server; this bounds a server that does not answer
                    await asyncio.wait_for(conn.execute(text.encode()), self.admin_timeout + 5)
        finally:
            await conn.close()

    async def reset_sandbox(self) -> None:
        if self.target.owned:
            conn = await self._connect("setup", search_path=False, bounded=True)
            try:
                ident = pgsql.Identifier(self.sandbox)
                await conn.execute(pgsql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(ident))
                await conn.execute(pgsql.SQL("CREATE SCHEMA {}").format(ident))
            finally:
                await conn.close()
            return
        await self._ensure_owner()
        await self._sandbox_ddl("empty", recreate=True)

    async def drop_sandbox(self) -> None:
        if self.target.owned:
            conn = await self._connect("setup", search_path=False, bounded=True)
            try:
                await conn.execute(pgsql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(pgsql.Identifier(self.sandbox)))
            finally:
                await conn.close()
            return
        try:
            await self._sandbox_ddl("drop", recreate=False)
        finally:
            owner, self.owner = self.owner, None
            if owner is not None:
                await anyio.to_thread.run_sync(owner.close)


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return redact(text.splitlines()[0]) if text else type(exc).__name__
