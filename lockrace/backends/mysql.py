"""MariaDB and MySQL 8 through PyMySQL, which blocks: a session's calls run on
its own thread (worker.py), other calls in worker threads (anyio.to_thread),
so the event loop never waits on the server.  The one exception waits for
nothing: a short statement is sent from the loop, and an answer that has
arrived whole is parsed there (mysql_answer.py).

Verified live on MariaDB 10.11 and on Oracle MySQL 9.7.4 (flavor "mysql8": the
performance_schema lock views, 3572 ER_LOCK_NOWAIT, max_execution_time, TLS on
TCP connections as MySQL offers it).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
import threading
import time
from time import perf_counter_ns

import anyio.to_thread
import pymysql
import pymysql.connections
import pymysql.converters
import pymysql.cursors
import pymysql.protocol
from pymysql.constants import CLIENT, SERVER_STATUS

from ..core import prepared as prepared_mod
from ..core.sqltext import try_statements, words
from ..core.events import ROW_LIMIT, Budget, LockInfo, StatementResult
from ..dialects import MARIADB, mysql_dialect_of
from ..dialects.mysql_family import CONNECTION_ERRORS as MYSQL_CONNECTION_ERRORS, MySQLFamilyDialect, classify_mysql
from ..core.states import TxnState
from ..servers.target import Target
from . import sandbox as sandbox_mod
from .base import Backend, ConnectError, MonitorConnection, RowLockHolders, SessionConnection, WaitReport, mysql_tag
from .loop_answer import SocketWatch
from .mysql_answer import LoopRead
from .pymysql_adapter import (LOOP_DRIVER, TEXT_CONV, Connection, count_rest, end_unbuffered, error_parts, is_open,
                              read_sent, send_query, shut, socket_of, take_error, warning_count)
from .worker import SessionThread


# errors that come before a statement runs at all: it did not parse (or was empty)
_NOT_PARSED = frozenset({"1064", "1065", "1149"})
# statements the server commits the open transaction for before it runs them
# (so even when they then fail): MariaDB/MySQL "Statements That Cause an Implicit Commit"
_COMMITTING = frozenset({"ALTER", "CREATE", "DROP", "RENAME", "TRUNCATE", "GRANT", "REVOKE", "LOCK", "ANALYZE",
                         "CHECK", "OPTIMIZE", "REPAIR", "FLUSH", "CACHE", "LOAD"})


# a cheap look first (this is on a refusal's way to the caller): a statement of the text
# may begin with one of those words
_MAY_COMMIT = re.compile(r"(?:^|;)\s*(?:" + "|".join(sorted(_COMMITTING)) + r")\b", re.IGNORECASE)


def _commits_first(sql: str, index: int) -> bool:
    """Whether statement ``index`` of ``sql`` commits the open transaction before it runs
    (CREATE/DROP TEMPORARY TABLE do not; LOAD only as LOAD INDEX)."""
    if not _MAY_COMMIT.search(sql):
        return False
    stmts = try_statements(sql, "mysql")
    if not stmts or index >= len(stmts):
        return False
    first = words(stmts[index], 4)
    if not first or first[0] not in _COMMITTING or "TEMPORARY" in first:
        return False
    return first[0] != "LOAD" or first[1:2] == ("INDEX",)


def _run(fn, *args):
    return anyio.to_thread.run_sync(fn, *args)


def _consume(done: asyncio.Future) -> None:
    """Mark a worker call's outcome as seen (its caller may have been cancelled)."""
    if not done.cancelled():
        done.exception()


async def _close_bounded(conn: Connection) -> None:
    """Close ``conn`` (its QUIT packet) without waiting on a server that does not answer."""
    call = asyncio.ensure_future(_run(conn.close))
    call.add_done_callback(_consume)
    try:
        await asyncio.wait_for(asyncio.shield(call), 1.0)
    except asyncio.TimeoutError:
        shut(conn)
    except asyncio.CancelledError:
        shut(conn)
        raise
    except Exception:
        pass


# lock wait timeout (row or metadata lock), NOWAIT refusal (MySQL 8), deadlock
_LOCK_ERRNOS = frozenset({"1205", "3572", "1213"})
_LOOP_SQL_MAX = 4096  # characters; a longer statement is sent by the session's thread
class MySQLSession(SocketWatch, SessionConnection):
    def __init__(self, conn: Connection, name: str, dialect: MySQLFamilyDialect, prepared_xa: set[str] | None = None,
                 budget_prefix: str = ""):
        self.conn = conn
        self.name = name
        self.dialect = dialect
        self.budget_prefix = budget_prefix  # Galera: reading budgets must not wait for wsrep_sync_wait
        self.ident = conn.thread_id()
        self._closed = False
        self._worker: SessionThread | None = None
        # XA transactions this run's sessions prepared and have not ended: they outlive
        # their connection (MariaDB 10.5+) and would hold their locks in the sandbox
        self.prepared_xa = prepared_xa if prepared_xa is not None else set()
        # whoever uses the connection holds this: the session's thread, or the loop from a
        # send until its answer is read (see mysql_answer.py)
        self.conn_lock = threading.Lock()
        self.rollback_on_timeout = False  # innodb_rollback_on_timeout (the backend reads it)
        self._init_watch()

    def _note_xa(self, sql: str, result: StatementResult) -> None:
        """The XA transactions ``sql`` prepared or ended, as the server's answer says."""
        prepared, finished = prepared_mod.changes(sql, [r.tag for r in result.succeeded], "mysql")
        self.prepared_xa.difference_update(finished)
        self.prepared_xa.update(prepared)

    @property
    def closed(self) -> bool:
        return self._closed or not is_open(self.conn)

    def send(self, sql: str, on_answer=None) -> asyncio.Future | None:
        """Send a short ``sql`` now, from the loop, and watch for its answer there
        (see mysql_answer.py); None where it cannot (a long statement, whose send
        could wait for the server to read; the connection busy or closed; a loop
        that cannot note arrivals; threaded reads, ``Backend.reads``): ``execute`` then
        does it all on the thread."""
        if self.threaded or self.closed or len(sql) > _LOOP_SQL_MAX or not LOOP_DRIVER:
            return None
        if not self.conn_lock.acquire(blocking=False):
            return None
        try:
            pending = getattr(socket_of(self.conn), "pending", None)
            if pending is not None and pending():  # TLS holds bytes nobody read: the thread's way
                self.conn_lock.release()
                return None
            loop = self._watching()
            if loop is None:
                self.conn_lock.release()
                return None
            data = sql.encode(self.conn.encoding)
            t0 = perf_counter_ns()
            send_query(self.conn, data)  # a short write into the socket's buffer
        except BaseException:  # a dead socket: the thread's attempt says so
            self.conn_lock.release()
            return None
        self.reading = reading = LoopRead(self, sql, t0, loop, on_answer)
        return reading.future

    def _socket_fd(self) -> int | None:
        sock = socket_of(self.conn)
        return sock.fileno() if sock is not None else None

    def run_timed(self, sql: str, sent_ns: int | None = None, arrived_ns: int | None = None) -> StatementResult:
        """Run ``sql`` and time it; ``sent_ns``: when it was sent already (see send) and
        only its answer is to be read (``arrived_ns``: when that answer came)."""
        # Unbuffered: rows are read off the socket as they come, the first ROW_LIMIT
        # kept and the rest only counted, so a huge result never sits in memory.
        sets: list[StatementResult] = []
        cur = self.conn.cursor(pymysql.cursors.SSCursor)
        t0 = perf_counter_ns() if sent_ns is None else sent_ns
        try:
            if sent_ns is None:
                cur.execute(sql)
            else:
                read_sent(self.conn, cur, sql)
            while True:
                has_rows = cur.description is not None
                rows = [tuple(r) for r in cur.fetchmany(ROW_LIMIT)] if has_rows else []
                total = len(rows) + (count_rest(cur) if len(rows) == ROW_LIMIT else 0)
                columns = [d[0] for d in cur.description] if has_rows else []
                sets.append(StatementResult(
                    "ok", columns=columns, rows=rows, has_rows=has_rows, row_count=total if has_rows else -1,
                    tag=mysql_tag(sql, cur.rowcount, has_rows, total), rowcount=total if has_rows else cur.rowcount,
                ))
                warnings = warning_count(cur)
                if not cur.nextset():
                    break
            t1 = arrived_ns or perf_counter_ns()
            if warnings:
                # what the mysql client says after "Query OK, ...": the count.  Reading them
                # (SHOW WARNINGS) is the user's to do: a statement of lockrace's here would
                # change what ROW_COUNT(), FOUND_ROWS() and the user's own SHOW WARNINGS say.
                sets[-1].notices = [f"{warnings} warning{'s' if warnings != 1 else ''} (SHOW WARNINGS lists"
                                    f" {'them' if warnings != 1 else 'it'})"]
        except pymysql.MySQLError as exc:
            t1 = arrived_ns or perf_counter_ns()
            errno, message = error_parts(exc)
            if isinstance(exc, pymysql.err.InterfaceError):
                self._closed = True
            return self._error_answer(errno, message, getattr(exc, "sqlstate", None) or "HY000", sql, t0, t1, sets)
        except (OSError, EOFError) as exc:  # the socket went away under PyMySQL
            t1 = perf_counter_ns()
            self._closed = True
            return StatementResult("connection_lost", message=str(exc) or "connection lost", elapsed_ns=t1 - t0, started_ns=t0)
        finally:
            if self._closed:
                end_unbuffered(cur)  # nothing more will come on a dead socket
            try:
                cur.close()
            except Exception:
                pass
        last = sets[-1]
        last.elapsed_ns = t1 - t0
        last.started_ns = t0
        last.result_sets = sets
        return last

    def _error_answer(self, errno: int | None, message: str, sqlstate: str, sql: str, t0: int, t1: int,
                      sets: list, outcome: str | None = None) -> StatementResult:
        """``outcome``: what the error means, when worked out beforehand (see lock_error_outcome)."""
        if errno in MYSQL_CONNECTION_ERRORS:
            self._closed = True
        if self._closed:
            outcome = "connection_lost"
        elif outcome is None:
            outcome = classify_mysql(errno, message, sql)
        return StatementResult.server_error(outcome, str(errno) if errno is not None else "", sqlstate, message,
                                            t0, t1 - t0, sets)

    @staticmethod
    def lock_error_outcome(sql: str) -> str:
        """What a lock wait timeout (1205) answering ``sql`` means: a refusal for a
        statement that would not wait (NOWAIT, WAIT 0), else a timeout.  Worked out
        while the statement waits, so that the answer's way to the caller does not
        read the SQL text again."""
        return classify_mysql(1205, "", sql)

    def take_lone_error(self, sql: str, packet: bytes, t0: int, t1: int,
                        outcome_1205: str | None = None) -> StatementResult:
        """On the loop: the whole answer was one error ``packet``, taken off the socket:
        read it as PyMySQL would, without building and raising PyMySQL's exception
        (the usual refusal or lock wait timeout)."""
        take_error(self.conn, packet)
        errno = int.from_bytes(packet[5:7], "little", signed=True)
        if packet[7:8] == b"#":
            sqlstate, message = packet[8:13].decode("ascii", "replace"), packet[13:].decode("utf-8", "replace")
        else:
            sqlstate, message = "HY000", packet[7:].decode("utf-8", "replace")
        return self._error_answer(errno, message, sqlstate, sql, t0, t1, [], outcome_1205 if errno == 1205 else None)

    def execute_blocking(self, sql: str, sent_ns: int | None = None) -> StatementResult:
        """On the session's thread: ``run_timed``, with the session's status flags true
        afterwards.  ``sent_ns``: sent from the loop then, which holds the connection's
        lock and hands it over with the rest of the answer."""
        if sent_ns is None:
            self.conn_lock.acquire()
        try:
            result = self.run_timed(sql, sent_ns)
            self.settle_status(result, sql)
        finally:
            self.conn_lock.release()
        return result

    @staticmethod
    def commits_first(sql: str) -> bool:
        """Whether the first statement of ``sql`` commits the open transaction before it
        runs (see ``settle_status``): worked out while a statement waits."""
        return _commits_first(sql, 0)

    def settle_status(self, result: StatementResult, sql: str = "", commits_first: bool | None = None) -> bool:
        """An error packet carries no status flags: the session's transaction state
        after an error is worked out from what the server does on that error, not
        read back (a statement of lockrace's on the session's connection would
        change what the user's next statement sees).  A deadlock rolls back the
        whole transaction, and so does a lock wait timeout under
        innodb_rollback_on_timeout; a statement that commits implicitly (ALTER,
        CREATE, DROP, TRUNCATE, ...) has committed it before it failed, unless it
        did not even parse; any other error leaves the transaction as it was.
        The flags are set accordingly; nothing is left to read (False).  ``commits_first``:
        ``commits_first(sql)``, worked out beforehand (it holds for an error of the first
        statement)."""
        if result.code == "1213" or result.code == "1205" and self.rollback_on_timeout \
                or result.code and result.code not in _NOT_PARSED and (
                    commits_first if commits_first is not None and not result.result_sets
                    else _commits_first(sql, len(result.result_sets))):
            self.conn.server_status &= ~SERVER_STATUS.SERVER_STATUS_IN_TRANS
        return False

    def release_then(self, result: StatementResult) -> StatementResult:
        """On the thread, after an answer read on the loop (which holds the lock)."""
        self.conn_lock.release()
        return result

    def thread(self) -> SessionThread:
        """The session's own worker thread (its statements and budget reads, one at a time)."""
        if self._worker is None:
            self._worker = SessionThread(f"lockrace-{self.name}")
        return self._worker

    async def execute(self, sql: str, sent: asyncio.Future | None = None) -> StatementResult:
        if sent is None:
            sent = self.thread().submit(self.execute_blocking, sql)
        # the answer is read to its end even if the caller stops waiting for it
        result = await sent
        if "XA" in sql.upper():
            self._note_xa(sql, result)
        return result

    async def txn_state(self) -> TxnState:
        return self.txn_state_now()

    def txn_state_now(self) -> TxnState:
        if self.closed:
            return TxnState.CLOSED
        in_trans = self.conn.server_status & SERVER_STATUS.SERVER_STATUS_IN_TRANS
        return TxnState.IN_TRANSACTION if in_trans else TxnState.IDLE

    def _budgets(self) -> tuple[Budget, ...]:
        with self.conn_lock:
            return self._read_budgets()

    def _read_budgets(self) -> tuple[Budget, ...]:
        cur = self.conn.cursor()
        cur.execute(self.budget_prefix + self.dialect.budgets_sql())
        return self.dialect.budgets_from(cur.fetchone())

    async def budgets(self) -> tuple[Budget, ...]:
        if self.closed:
            return ()
        try:
            return await self.thread().submit(self._budgets)
        except (pymysql.MySQLError, OSError):
            return ()

    async def close(self) -> None:
        self._closed = True
        if self.reading is not None:
            self.reading.abandon()
        self.unwatch(arrivals=True)
        try:
            await _run(self.conn.close)  # not behind a call the session's thread may be stuck in
        except Exception:
            pass
        if self._worker is not None:
            self._worker.stop()


_MDL_WAITERS = """
SELECT ID, STATE, INFO FROM information_schema.PROCESSLIST
WHERE ID IN ({ids}) AND STATE LIKE 'Waiting for %%lock%%'
"""


_DDL_TEXT = re.compile(r"^\s*(alter|create|drop|truncate|rename|lock\s+tables?|optimize|analyze)\b")

_MDL_QUEUED = """
SELECT ID, INFO FROM information_schema.PROCESSLIST
WHERE ID <> %s AND STATE LIKE 'Waiting for table metadata lock'
"""


# the blocker of a row-lock wait on a MySQL server without performance_schema: nobody can say
_UNNAMED = -1
NO_PERFORMANCE_SCHEMA = ("an unnamed holder (performance_schema is OFF on this MySQL server:"
                         " it does not tell who holds the lock)")

# MySQL's metadata lock types on a table (sql/mdl.cc, MDL_object_lock): which granted
# locks a request cannot share, and which waiting requests it must let go first
_MDL_SHORT = {"INTENTION_EXCLUSIVE": "IX", "SHARED": "S", "SHARED_HIGH_PRIO": "SH", "SHARED_READ": "SR",
              "SHARED_WRITE": "SW", "SHARED_WRITE_LOW_PRIO": "SWLP", "SHARED_UPGRADABLE": "SU",
              "SHARED_READ_ONLY": "SRO", "SHARED_NO_WRITE": "SNW", "SHARED_NO_READ_WRITE": "SNRW",
              "EXCLUSIVE": "X"}
_MDL_GRANTED_CLASH = {
    "S": {"X"}, "SH": {"X"}, "SR": {"SNRW", "X"},
    "SW": {"SRO", "SNW", "SNRW", "X"}, "SWLP": {"SRO", "SNW", "SNRW", "X"},
    "SU": {"SU", "SNW", "SNRW", "X"}, "SRO": {"SW", "SWLP", "SNW", "SNRW", "X"},
    "SNW": {"SW", "SWLP", "SU", "SRO", "SNW", "SNRW", "X"},
    "SNRW": {"SR", "SW", "SWLP", "SU", "SRO", "SNW", "SNRW", "X"},
    "X": {"S", "SH", "SR", "SW", "SWLP", "SU", "SRO", "SNW", "SNRW", "X"},
    "IX": set(),
}
_MDL_WAITING_CLASH = {
    "S": set(), "SH": set(), "SR": {"SNRW", "X"}, "SW": {"SNW", "SNRW", "X"},
    "SWLP": {"SRO", "SNW", "SNRW", "X"}, "SU": {"X"}, "SRO": {"SR", "SNRW", "X"},
    "SNW": {"X"}, "SNRW": {"X"}, "X": set(), "IX": set(),
}


_WAITED_TABLE = re.compile(r"\b(?:FROM|UPDATE|INTO|TABLE|TABLES|JOIN)\s+(?:`?\w+`?\.)?`?([A-Za-z_][\w$]*)`?", re.IGNORECASE)


def _waited_table(info: str | None) -> str:
    """The first table a statement names (a metadata-lock waiter's SQL)."""
    m = _WAITED_TABLE.search(info or "")
    return m.group(1) if m else ""


def _table_name(raw: str | None) -> str:
    """`lockrace`.`accounts` -> accounts"""
    if not raw:
        return ""
    return raw.split(".")[-1].strip("`")


class MySQLMonitor(MonitorConnection):
    galera_seen: dict[str, int] | None = None
    """A Galera node's wsrep counters as last read (backends/galera.py); None: not read."""

    def __init__(self, conn: Connection, dialect: MySQLFamilyDialect, sandbox: str, has_mdl_info: bool,
                 own_sessions: set[int] | None = None):
        self.conn = conn
        self.ident = conn.thread_id()
        self._broken = False
        self.dialect = dialect
        self._innodb_read_at = 0.0
        self._waits_seen: list[tuple] | None = None  # MariaDB: the last answer of InnoDB's lock views
        self._fresh_due: float | None = None  # when a fresh answer can be had, if the last one was not
        self.sandbox = sandbox
        self.has_mdl_info = has_mdl_info
        # MySQL with performance_schema=OFF: its lock views are empty; INNODB_TRX still says
        # who waits for a row lock, but not on whom
        self.performance_schema = True
        self.own_sessions = own_sessions if own_sessions is not None else set()  # thread ids of this run's sessions
        self.lock = asyncio.Lock()
        self.first_poll_s = dialect.first_poll_s  # see dialects/mariadb.py

    @property
    def _performance_schema_views(self) -> bool:
        """Whether row and metadata lock waits are read from performance_schema (MySQL, when ON)."""
        return self.dialect.lock_views_in_performance_schema and self.performance_schema

    async def run_query(self, sql: str, args=None) -> list[tuple]:
        def work():
            cur = self.conn.cursor()
            cur.execute(sql, args)
            return [tuple(r) for r in cur.fetchall()] if cur.description else []

        return await self._call(work)

    async def _call(self, work):
        """Run ``work`` (blocking, on the monitor connection) in a worker thread, one at a time."""
        await self.lock.acquire()
        try:
            call = asyncio.ensure_future(_run(work))
        except BaseException:
            self.lock.release()
            raise
        # The worker thread goes on using the connection even when this caller is
        # cancelled: the lock is released only once it is done, or the next query
        # (Race.close's KILL QUERY right after cancelling the watcher) would
        # interleave packets on this connection and break it ("Packet sequence
        # number wrong").  The caller itself returns at once when cancelled.
        call.add_done_callback(lambda done: (self.lock.release(), _consume(done)))
        try:
            return await asyncio.shield(call)
        except (pymysql.err.OperationalError, pymysql.err.InterfaceError, OSError) as exc:
            if not self.conn.open or error_parts(exc)[0] in MYSQL_CONNECTION_ERRORS \
                    or isinstance(exc, (pymysql.err.InterfaceError, OSError)):
                self._broken = True
            raise

    @property
    def closed(self) -> bool:
        return self._broken or not self.conn.open

    async def _innodb_query(self, sql: str, args=None) -> list[tuple]:
        """Read InnoDB's INNODB_TRX (and MariaDB's INNODB_LOCKS / INNODB_LOCK_WAITS).

        InnoDB refreshes the snapshot behind these views only when nobody has
        read it for 100 ms (trx0i_s.cc, CACHE_MIN_IDLE_TIME): a reader that
        asks more often keeps getting the same stale snapshot.  So every read
        waits until 100 ms have passed since the previous one.  MySQL's
        performance_schema tables have no such cache.
        """
        if self.dialect.lock_views_cached or "INNODB_TRX" in sql:
            loop = asyncio.get_running_loop()
            delay = self._innodb_read_at + 0.101 - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            try:
                return await self.run_query(sql, args)
            finally:
                self._innodb_read_at = loop.time()
        return await self.run_query(sql, args)

    async def _mariadb_waits(self) -> list[tuple]:
        """Every lock wait InnoDB reports (MariaDB), all waiters.

        Asked again within 100 ms of the last read, InnoDB would answer from the
        same cache it did then (it refreshes it only after 100 ms without a
        read): that answer is kept here and given back without asking, which
        costs nothing and, unlike another read, does not put off the refresh.
        """
        loop = asyncio.get_running_loop()
        if self._waits_seen is not None and loop.time() - self._innodb_read_at < 0.101:
            self._fresh_due = self._innodb_read_at + 0.101
            return self._waits_seen
        taken = perf_counter_ns()
        try:
            rows = await self.run_query(self.dialect.lock_view("innodb_lock_waits"))
        finally:
            self._innodb_read_at = loop.time()
        self._waits_seen = rows
        self.snapshot_ns = taken
        self._fresh_due = None
        return rows

    def blocked_poll_s(self, default: float) -> float | None:
        """MariaDB: while every statement waits, look again only once, when the last
        answer came from a snapshot that may be stale, as soon as a fresh one can be
        had; else not at all (a new statement or a finish wakes the monitor).  A look
        every 100 ms would keep InnoDB's snapshot from refreshing, and the next wait
        that begins would be seen up to 100 ms late."""
        if not self.dialect.lock_views_cached:
            return default
        if self._fresh_due is None:
            return None
        return max(0.0, self._fresh_due - asyncio.get_running_loop().time())

    async def waits(self, idents: list[int]) -> dict[int, WaitReport]:
        if not idents:
            return {}
        ids = ",".join(str(int(i)) for i in idents)
        if self.dialect.lock_views_in_performance_schema and not self.performance_schema:
            return await self._waits_without_performance_schema(idents)
        if self.dialect.lock_views_in_performance_schema:
            rows = await self._innodb_query(self.dialect.lock_view("data_lock_waits").format(ids=ids))
        else:
            wanted = {int(i) for i in idents}
            rows = [r for r in await self._mariadb_waits() if int(r[0]) in wanted]
        blockers: dict[int, list[int]] = {}
        locks: dict[int, LockInfo] = {}
        for waiter, blocker, mode, ltype, table, index, data in rows:
            waiter, blocker = int(waiter), int(blocker)
            blockers.setdefault(waiter, [])
            if blocker not in blockers[waiter]:
                blockers[waiter].append(blocker)
            if waiter not in locks:
                kind = "record" if (ltype or "").upper() == "RECORD" else "table"
                detail = ""
                if kind == "record":
                    detail = f"{index} {data}" if index else str(data or "")
                    if data in ("supremum pseudo-record",):
                        detail = f"{index} gap before supremum"
                locks[waiter] = LockInfo(kind, str(mode or ""), _table_name(table), detail.strip())
        taken = self.snapshot_ns if self.dialect.lock_views_cached else None
        reports = {w: WaitReport(w, tuple(b), locks.get(w), taken_ns=taken) for w, b in blockers.items()}
        missing = [i for i in idents if i not in reports]
        if missing:
            reports.update(await self._mdl_waits(missing))
        return reports

    async def _waits_without_performance_schema(self, idents: list[int]) -> dict[int, WaitReport]:
        """MySQL with performance_schema=OFF: INNODB_TRX (a cache InnoDB refreshes only
        after 100 ms without a read, so read no more often) says which sessions wait
        for a row lock; nothing says on whom.  Metadata-lock waits still show in the
        process list."""
        ids = ",".join(str(int(i)) for i in idents)
        rows = await self._innodb_query(
            "SELECT trx_mysql_thread_id, trx_query FROM information_schema.INNODB_TRX"
            f" WHERE trx_state = 'LOCK WAIT' AND trx_mysql_thread_id IN ({ids})")
        reports = {}
        for ident, sql in rows:
            table = _waited_table(sql)
            reports[int(ident)] = WaitReport(int(ident), (_UNNAMED,), LockInfo("record", "", table, ""),
                                             process_names={_UNNAMED: NO_PERFORMANCE_SCHEMA})
        missing = [i for i in idents if i not in reports]
        if missing:
            reports.update(await self._mdl_waits(missing))
        return reports

    async def _mdl_waits(self, idents: list[int]) -> dict[int, WaitReport]:
        ids = ",".join(str(int(i)) for i in idents)
        rows = await self.run_query(_MDL_WAITERS.format(ids=ids))
        reports = {}
        for ident, state, info in rows:
            holders: tuple[int, ...] = ()
            table = ""
            if self._performance_schema_views:
                holders, table = await self._mysql_mdl_blockers(int(ident))
            elif self.has_mdl_info and re.search(r"global read|backup", str(state), re.IGNORECASE):
                # FLUSH TABLES WITH READ LOCK holds the backup lock in its FTWRL modes
                found = await self.run_query(
                    "SELECT DISTINCT THREAD_ID FROM information_schema.METADATA_LOCK_INFO"
                    " WHERE LOCK_MODE LIKE 'MDL_BACKUP_FTWRL%%' AND THREAD_ID <> %s", (ident,))
                holders = tuple(sorted(int(r[0]) for r in found))
            elif self.has_mdl_info:
                found = await self.run_query(
                    "SELECT DISTINCT THREAD_ID, TABLE_NAME FROM information_schema.METADATA_LOCK_INFO"
                    " WHERE TABLE_SCHEMA = %s AND THREAD_ID <> %s AND TABLE_NAME <> ''",
                    (self.sandbox, ident),
                )
                text = (info or "").lower()
                named = [(int(t), n) for t, n in found if n and re.search(rf"\b{re.escape(n.lower())}\b", text)]
                holders = tuple(sorted({t for t, _ in named}))
                table = named[0][1] if named else ""
                if table and not _DDL_TEXT.match(text):
                    # A read or write waits for a metadata lock only behind DDL.  METADATA_LOCK_INFO
                    # lists granted locks, not the queued DDL that really blocks it: name that.
                    queued = await self.run_query(_MDL_QUEUED, (ident,))
                    ahead = tuple(sorted(int(t) for t, q in queued
                                         if re.search(rf"\b{re.escape(table.lower())}\b", (q or "").lower())))
                    holders = ahead or holders
            if not table and not re.search(r"global read|backup", str(state), re.IGNORECASE):
                table = _waited_table(info)  # the server names no table without the plugin: the statement does
            reports[int(ident)] = WaitReport(int(ident), holders, LockInfo("metadata", "", table, str(state)))
        return reports

    async def _mysql_mdl_blockers(self, ident: int) -> tuple[tuple[int, ...], str]:
        """Who a MySQL session's pending metadata lock waits for, and on which table, from
        performance_schema.metadata_locks: the sessions holding a lock its request cannot
        share, and those whose own pending request goes first (an ALTER's EXCLUSIVE
        request makes later reads queue behind it: they wait for the ALTER, not for the
        reader it waits for).  The two tables are MySQL's own (sql/mdl.cc)."""
        rows = await self.run_query(
            "SELECT t.PROCESSLIST_ID, o.LOCK_TYPE, o.LOCK_STATUS, o.OBJECT_TYPE, o.OBJECT_NAME"
            " FROM performance_schema.metadata_locks p"
            " JOIN performance_schema.threads pt ON pt.THREAD_ID = p.OWNER_THREAD_ID"
            " JOIN performance_schema.metadata_locks o ON o.OBJECT_TYPE = p.OBJECT_TYPE"
            "  AND o.OBJECT_SCHEMA <=> p.OBJECT_SCHEMA AND o.OBJECT_NAME <=> p.OBJECT_NAME"
            "  AND o.OWNER_THREAD_ID <> p.OWNER_THREAD_ID"
            " JOIN performance_schema.threads t ON t.THREAD_ID = o.OWNER_THREAD_ID"
            " WHERE p.LOCK_STATUS = 'PENDING' AND pt.PROCESSLIST_ID = %s",
            (ident,),
        )
        mine = await self.run_query(
            "SELECT p.LOCK_TYPE FROM performance_schema.metadata_locks p"
            " JOIN performance_schema.threads pt ON pt.THREAD_ID = p.OWNER_THREAD_ID"
            " WHERE p.LOCK_STATUS = 'PENDING' AND pt.PROCESSLIST_ID = %s", (ident,))
        if not rows:
            return (), ""
        table = str(rows[0][4] or "") if rows[0][3] == "TABLE" else ""
        wanted = _MDL_SHORT.get(str(mine[0][0])) if mine else None
        granted = {int(r[0]) for r in rows if r[2] == "GRANTED"}
        if wanted is None or rows[0][3] != "TABLE":
            return tuple(sorted(granted)), table  # not a table's lock: whoever holds one
        blockers = set()
        for pid, ltype, status, _otype, _name in rows:
            other = _MDL_SHORT.get(str(ltype))
            if other is None:
                blockers.add(int(pid))
            elif status == "GRANTED" and other in _MDL_GRANTED_CLASH[wanted]:
                blockers.add(int(pid))
            elif status == "PENDING" and other in _MDL_WAITING_CLASH[wanted]:
                blockers.add(int(pid))
        return tuple(sorted(blockers or granted)), table

    async def deadlock_report(self) -> str | None:
        """InnoDB's LATEST DETECTED DEADLOCK section (SHOW ENGINE INNODB STATUS: read-only,
        needs the PROCESS privilege); None when it cannot be read."""
        from ..core.deadlock import latest_deadlock

        try:
            rows = await self.run_query("SHOW ENGINE INNODB STATUS")
        except pymysql.MySQLError:
            return None
        return latest_deadlock(str(rows[0][2])) if rows and len(rows[0]) > 2 else None

    async def cancel(self, ident: int) -> bool:
        try:
            await self.run_query(f"KILL QUERY {int(ident)}")
            return True
        except pymysql.MySQLError:
            return False

    async def terminate(self, ident: int) -> bool:
        try:
            await self.run_query(f"KILL CONNECTION {int(ident)}")
            return True
        except pymysql.MySQLError:
            return False

    async def plain_read(self, sql: str) -> list[tuple] | None:
        try:
            return await self.run_query(sql)
        except pymysql.MySQLError:
            return None

    async def row_lock_holders(self, table: str, exclude: int) -> RowLockHolders:
        try:
            if self._performance_schema_views:
                rows = await self.run_query(
                    # a row lock's owner by its transaction's table lock (see data_lock_waits.sql)
                    "SELECT t.PROCESSLIST_ID, COUNT(*) FROM performance_schema.data_locks l"
                    " JOIN (SELECT ENGINE_TRANSACTION_ID, MIN(THREAD_ID) AS THREAD_ID"
                    "  FROM performance_schema.data_locks WHERE LOCK_TYPE = 'TABLE' GROUP BY ENGINE_TRANSACTION_ID) o"
                    "  ON o.ENGINE_TRANSACTION_ID = l.ENGINE_TRANSACTION_ID"
                    " JOIN performance_schema.threads t ON t.THREAD_ID = o.THREAD_ID"
                    " WHERE l.LOCK_TYPE = 'RECORD' AND l.LOCK_STATUS = 'GRANTED' AND l.OBJECT_SCHEMA = %s"
                    " AND l.OBJECT_NAME = %s AND t.PROCESSLIST_ID <> %s GROUP BY t.PROCESSLIST_ID",
                    (self.sandbox, table, exclude),
                )
                return RowLockHolders(tuple(sorted(int(r[0]) for r in rows)), None)
            # MariaDB lists a transaction's locks only while someone waits on them;
            # its transaction list still says which transactions hold row locks.  One
            # that is itself waiting (LOCK WAIT) is counted by its lock request, not by
            # a lock it holds; a client working in another database holds none of ours.
            # SHOW ENGINE INNODB STATUS is built afresh on every call, where INNODB_TRX
            # is a cache that a read within the last 100 ms leaves stale.
            holders = await self._status_row_lockers(exclude)
            if holders is not None:
                return RowLockHolders(holders, None)
            rows = await self._innodb_query(
                "SELECT t.trx_mysql_thread_id FROM information_schema.INNODB_TRX t"
                " JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id"
                " WHERE t.trx_rows_locked > 0 AND t.trx_state <> 'LOCK WAIT' AND t.trx_mysql_thread_id <> %s"
                " AND p.DB = %s",
                (exclude, self.sandbox),
            )
            return RowLockHolders(tuple(sorted(int(r[0]) for r in rows)), None)
        except pymysql.MySQLError:
            return RowLockHolders((), None)

    async def _status_row_lockers(self, exclude: int) -> tuple[int, ...] | None:
        """Threads (in the sandbox, other than ``exclude``) whose transactions hold row
        locks and do not wait, from SHOW ENGINE INNODB STATUS; None if unreadable."""

        def work():
            cur = self.conn.cursor()
            cur.execute("SHOW ENGINE INNODB STATUS")
            text = str(cur.fetchone()[2])
            threads = []
            for block in text.split("---TRANSACTION ")[1:]:
                block = block.split("\n--------")[0]  # the last one runs into the next section
                thread = re.search(r"(?:MySQL|MariaDB) thread id (\d+)", block)
                rows = re.search(r"(\d+) row lock\(s\)", block)
                if thread and rows and int(rows.group(1)) > 0 and "LOCK WAIT" not in block \
                        and int(thread.group(1)) != exclude:
                    threads.append(int(thread.group(1)))
            # this run's sessions work in the sandbox; whether another client does, the
            # processlist tells (a ~1 ms read on a busy server: only for those)
            foreign = [t for t in threads if t not in self.own_sessions]
            if foreign:
                cur.execute("SELECT ID FROM information_schema.PROCESSLIST WHERE DB = %s AND ID IN ("
                            + ",".join(str(t) for t in foreign) + ")", (self.sandbox,))
                foreign = [int(r[0]) for r in cur.fetchall()]
            return tuple(sorted([t for t in threads if t in self.own_sessions] + foreign))

        try:
            return await self._call(work)
        except (pymysql.MySQLError, TypeError, IndexError):
            return None

    async def skip_reads(self, sql: str) -> tuple[list[tuple] | None, list[tuple] | None]:
        """The read as committed and the read at READ UNCOMMITTED (rows others are
        still inserting appear there: InnoDB's SKIP LOCKED skips them)."""

        def read(isolation: str) -> list[tuple]:
            # a read-only transaction, rolled back: the read can change nothing
            cur = self.conn.cursor()
            cur.execute(f"SET TRANSACTION ISOLATION LEVEL {isolation}")
            cur.execute("START TRANSACTION READ ONLY")
            try:
                cur.execute(sql)
                return [tuple(r) for r in cur.fetchall()]
            finally:
                cur.execute("ROLLBACK")

        def work():
            return read("READ COMMITTED"), read("READ UNCOMMITTED")

        try:
            return await self._call(work)
        except pymysql.MySQLError:
            return None, None

    async def close(self) -> None:
        try:
            await _run(self.conn.close)
        except Exception:
            pass


class MySQLBackend(Backend):
    family = "mysql"

    def __init__(self, target: Target):
        self.target = target
        self.sandbox = target.sandbox
        self._dialect: MySQLFamilyDialect = MARIADB  # until the server says what it is (open)
        self.flavor = MARIADB.name
        self.version = ""
        self.has_mdl_info = False
        self.performance_schema = True  # MySQL: its lock views are there (SELECT @@performance_schema)
        self.token = sandbox_mod.new_token()
        self.owner: Connection | None = None  # holds the sandbox's named lock (DSN servers)
        self.marked = True  # its sandbox carries the mark (a database comment, or a marker procedure)
        self.prepared_xa: set[str] = set()  # XA transactions this run's sessions prepared (see MySQLSession)
        self.session_idents: set[int] = set()  # thread ids of the sessions this backend opened
        self.budget_prefix = ""  # set by a cluster topology (backends/galera.py)
        self.galera = False  # a Galera node (wsrep_on): ownership needs the replicated heartbeat
        self.heartbeat: _Heartbeat | None = None
        self.alive_elsewhere: set[str] = set()  # marked sandboxes the sweep found alive (on another node)
        self.budget_defaults: dict[str, float] = {}  # the global values (ms) that SET ... = DEFAULT gives
        self.rollback_on_timeout = False  # innodb_rollback_on_timeout: a 1205 ends the whole transaction

    def connect_blocking(self, database: str | None, role: str = "session") -> Connection:
        """A connection; ``role`` "admin" (setup, teardown, sandbox) or "monitor"
        gets server-side bounds on every statement it runs, and an admin one a
        client-side read timeout (a server that stops answering)."""
        kwargs = dict(self.target.mysql_kwargs)
        if role == "admin":
            kwargs["read_timeout"] = self.admin_timeout + 5
        elif role == "heartbeat":
            kwargs["read_timeout"] = kwargs["write_timeout"] = 5
        try:
            conn = Connection(
                **kwargs, database=database, autocommit=True, conv=TEXT_CONV, connect_timeout=5,
                client_flag=CLIENT.MULTI_STATEMENTS, charset="utf8mb4",
            )
            if role in ("admin", "monitor", "heartbeat"):
                # lock waits: at most DDL_LOCK_WAIT_S (and the step timeout) for admin work
                seconds = min(sandbox_mod.DDL_LOCK_WAIT_S, max(1, math.ceil(self.admin_timeout))) if role == "admin" else 1
                limits = [f"lock_wait_timeout = {seconds}", f"innodb_lock_wait_timeout = {seconds}"]
                budget = {"admin": self.admin_timeout, "monitor": 5.0}.get(role, 2.0)
                limits.append(self.dialect.limit_clause(budget))
                conn.query("SET SESSION " + ", ".join(limits))
            return conn
        except pymysql.MySQLError as exc:
            errno, message = error_parts(exc)
            message = message.split("\n")[0].strip()  # keep the server's closing parenthesis
            if kwargs.get("password"):
                message = message.replace(kwargs["password"], "***")
            raise ConnectError(f"cannot connect to MySQL/MariaDB at {self.target.describe()}: {message}") from None
        except (OSError, ValueError) as exc:
            raise ConnectError(f"cannot connect to MySQL/MariaDB at {self.target.describe()}: {exc}") from None

    async def connect(self, database: str | None = "", role: str = "admin") -> Connection:
        return await _run(self.connect_blocking, self.sandbox if database == "" else database, role)

    def _sweep_and_create(self, conn: Connection) -> None:
        self._sweep(conn)
        self._create(conn)

    async def _admin_call(self, conn: Connection, work):
        """Run ``work`` (blocking, on ``conn``) in a worker thread.  Cancelled, it
        returns at once: the statement is killed on the server from a fresh
        connection and, if the thread is still inside the driver after a second,
        the socket is shut so that it comes out (nothing waits on the server)."""
        call = asyncio.ensure_future(_run(work))
        call.add_done_callback(_consume)  # its answer may come after the caller left
        try:
            return await asyncio.shield(call)
        except asyncio.CancelledError:
            ident = conn.thread_id()
            with contextlib.suppress(BaseException):
                killing = asyncio.ensure_future(_run(self._kill_query, ident))
                killing.add_done_callback(_consume)
                await asyncio.wait_for(asyncio.shield(killing), 1.0)
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(call), 1.0)
            if not call.done():
                shut(conn)
            raise

    def _kill_query(self, ident: int) -> None:
        kwargs = dict(self.target.mysql_kwargs)
        kwargs["read_timeout"] = 1
        killer = Connection(**kwargs, autocommit=True, conv=TEXT_CONV, connect_timeout=1, charset="utf8mb4")
        try:
            killer.query(f"KILL QUERY {int(ident)}")
        finally:
            killer.close()

    @property
    def dialect(self) -> MySQLFamilyDialect:
        return self._dialect

    async def open(self) -> "MySQLBackend":
        conn = await self.connect(None, role="probe")  # the flavor (which limits exist) is not known yet
        try:
            def probe():
                cur = conn.cursor()
                cur.execute("SELECT VERSION()")
                version = cur.fetchone()[0]
                try:
                    cur.execute("SELECT @@wsrep_on")
                    self.galera = str(cur.fetchone()[0]).upper() in ("1", "ON")
                except pymysql.MySQLError:  # no wsrep variables: not a Galera node
                    self.galera = False
                if self.target.owned:
                    cur.execute(f"CREATE DATABASE IF NOT EXISTS `{self.sandbox}`")
                cur.execute("SELECT COUNT(*) FROM information_schema.PLUGINS"
                            " WHERE PLUGIN_NAME = 'METADATA_LOCK_INFO' AND PLUGIN_STATUS = 'ACTIVE'")
                mdl = int(cur.fetchone()[0])
                # what SET ... = DEFAULT gives a session, and whether a lock wait timeout
                # rolls back the whole transaction (read-only, server-wide)
                dialect = mysql_dialect_of(version)
                cur.execute(dialect.budgets_sql("global.") + ", @@global.innodb_rollback_on_timeout")
                *budgets, rollback = cur.fetchone()
                perf = True
                if dialect.lock_views_in_performance_schema:  # MySQL: are they there at all?
                    cur.execute("SELECT @@performance_schema")
                    perf = str(cur.fetchone()[0]) in ("1", "ON")
                self.performance_schema = perf
                defaults = {b.name: b.ms for b in dialect.budgets_from(budgets)}
                return version, mdl, defaults, str(rollback) in ("1", "ON")

            raw, mdl, self.budget_defaults, self.rollback_on_timeout = await self._admin_call(conn, probe)
        finally:
            await _close_bounded(conn)
        self._dialect = mysql_dialect_of(raw)
        self.flavor = self._dialect.name
        self.version = raw.split("-")[0]
        self.has_mdl_info = bool(mdl)
        if not self.target.owned and not self.target.joins:
            await self._ensure_owner()
            conn = await self.connect(None, role="admin")  # now that the flavor (its limits) is known
            try:
                await self._admin_call(conn, lambda: self._sweep_and_create(conn))
            except BaseException:
                owner, self.owner = self.owner, None  # the name is not ours after all: let it go
                if owner is not None:
                    await _run(owner.close)
                raise
            finally:
                await _close_bounded(conn)
            if self.galera:
                self.heartbeat = _Heartbeat(self)
                self.heartbeat.start()
        return self

    # ------------------------------------------------------------ the sandbox on a DSN server

    def _comment(self, cur, name: str) -> tuple[bool, str | None]:
        """(the database exists, its mark: the database's comment, or where the server
        keeps none (MySQL, MariaDB before 10.5) the comment of its marker procedure;
        None: it has neither)."""
        try:
            cur.execute("SELECT SCHEMA_COMMENT FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s", (name,))
            row = cur.fetchone()
            return (row is not None, row[0] if row else None)
        except pymysql.MySQLError:  # no SCHEMA_COMMENT before MariaDB 10.5 / on MySQL
            pass
        cur.execute("SELECT NULL FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s", (name,))
        if cur.fetchone() is None:
            return (False, None)
        cur.execute("SELECT ROUTINE_COMMENT FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = %s"
                    " AND ROUTINE_NAME = %s AND ROUTINE_TYPE = 'PROCEDURE'", (name, sandbox_mod.MARKER_ROUTINE))
        row = cur.fetchone()
        return (True, row[0] if row else None)

    def _owner_connect(self) -> Connection:
        conn = self.connect_blocking(None)
        cur = conn.cursor()
        try:
            cur.execute("SET SESSION wait_timeout = 31536000")  # idle for a year: still the owner
        except pymysql.MySQLError:
            pass
        cur.execute("SELECT GET_LOCK(%s, 0)", (sandbox_mod.named_lock(self.sandbox),))
        if str(cur.fetchone()[0]) != "1":
            _, comment = self._comment(cur, self.sandbox)
            conn.close()
            raise sandbox_mod.refuse_existing("database", self.sandbox, comment or sandbox_mod.MARK, True)
        return conn

    async def _ensure_owner(self) -> None:
        if self.target.owned:
            return
        if self.owner is None or not self.owner.open:
            self.owner = await _run(self._owner_connect)

    def _check_owner(self, cur) -> None:
        """Take the sandbox's named lock again if someone ended our owner connection."""
        cur.execute("SELECT IS_FREE_LOCK(%s)", (sandbox_mod.named_lock(self.sandbox),))
        if str(cur.fetchone()[0]) != "1":
            return  # held: by our owner connection
        old, self.owner = self.owner, None
        if old is not None:
            try:
                old.close()
            except Exception:
                pass
        self.owner = self._owner_connect()

    def _create(self, conn: Connection) -> None:
        cur = conn.cursor()
        name = self.sandbox
        try:
            try:
                cur.execute(f"CREATE DATABASE `{name}` COMMENT %s", (sandbox_mod.marker(self.token),))
            except pymysql.err.ProgrammingError as exc:
                if error_parts(exc)[0] != 1064:  # a syntax error: this server takes no database comment
                    raise
                cur.execute(f"CREATE DATABASE `{name}`")
                self.marked = self._mark_by_routine(cur, name)
        except pymysql.MySQLError as exc:
            errno, message = error_parts(exc)
            if errno == 1007:  # ER_DB_CREATE_EXISTS
                _, comment = self._comment(cur, name)
                raise sandbox_mod.refuse_existing("database", name, comment, name in self.alive_elsewhere) from None
            raise sandbox_mod.SandboxError(f"cannot create the sandbox database {name}: {message}") from None
        if self.galera:
            try:
                cur.execute(f"CREATE TABLE `{name}`.`{sandbox_mod.HEARTBEAT_TABLE}` (id tinyint PRIMARY KEY,"
                            " token varchar(16) NOT NULL, beat bigint NOT NULL, at datetime(6) NOT NULL) ENGINE=InnoDB"
                            " COMMENT 'lockrace: its owner updates this row while it runs'")
                cur.execute(f"INSERT INTO `{name}`.`{sandbox_mod.HEARTBEAT_TABLE}` VALUES (1, %s, 0, UTC_TIMESTAMP(6))",
                            (self.token,))
            except pymysql.MySQLError as exc:
                raise sandbox_mod.SandboxError(
                    f"cannot create the sandbox database {name}'s heartbeat table: {error_parts(exc)[1]}") from None

    def _mark_by_routine(self, cur, name: str) -> bool:
        """Mark a database on a server without database comments (MySQL, MariaDB before
        10.5) by an empty procedure in it whose comment is the marker: unlike a table it
        shows in no SHOW TABLES or information_schema.TABLES of the user's, it goes with
        DROP DATABASE, and a later run finds it in information_schema.ROUTINES.
        False: the account may not create routines there (the sandbox stays unmarked)."""
        try:
            cur.execute(f"CREATE PROCEDURE `{name}`.`{sandbox_mod.MARKER_ROUTINE}`() COMMENT %s BEGIN END",
                        (sandbox_mod.marker(self.token),))
            return True
        except pymysql.MySQLError:
            return False

    def _marked_databases(self, cur) -> list[tuple[str, str]]:
        """(name, marker) of every database marked as a lockrace sandbox that this account sees."""
        try:
            cur.execute("SELECT SCHEMA_NAME, SCHEMA_COMMENT FROM information_schema.SCHEMATA"
                        " WHERE LEFT(SCHEMA_COMMENT, %s) = %s", (len(sandbox_mod.MARK), sandbox_mod.MARK))
            found = list(cur.fetchall())
        except pymysql.MySQLError:  # no database comments here
            found = []
        cur.execute("SELECT ROUTINE_SCHEMA, ROUTINE_COMMENT FROM information_schema.ROUTINES WHERE ROUTINE_NAME = %s"
                    " AND ROUTINE_TYPE = 'PROCEDURE' AND LEFT(ROUTINE_COMMENT, %s) = %s",
                    (sandbox_mod.MARKER_ROUTINE, len(sandbox_mod.MARK), sandbox_mod.MARK))
        seen = {name for name, _ in found}
        return found + [(name, comment) for name, comment in cur.fetchall() if name not in seen]

    def _sweep(self, conn: Connection) -> None:
        """Drop marked sandboxes whose owner is provably gone: its named lock is free (on a
        Galera node: and its heartbeat has stopped, see ``_gone``)."""
        cur = conn.cursor()
        try:
            marked = self._marked_databases(cur)
        except pymysql.MySQLError:
            return  # the catalogue cannot be read: nothing is provably lockrace's
        free: dict[str, str] = {}  # name -> comment, its named lock free here (held by us now)
        try:
            for name, comment in marked:
                if name != self.sandbox:  # our owner connection holds our own lock already
                    cur.execute("SELECT GET_LOCK(%s, 0)", (sandbox_mod.named_lock(name),))
                    if str(cur.fetchone()[0]) != "1":
                        continue  # its owner is alive (on this node)
                free[name] = comment
            gone = self._gone(cur, free) if self.galera else set(free)
            self.alive_elsewhere = set(free) - gone
            for name in sorted(gone):
                try:
                    self._end_connections(cur, name)
                    if self._foreign_dependents(cur, name):
                        continue  # another client's object uses it: left for a later run
                    cur.execute(f"SET SESSION lock_wait_timeout = {sandbox_mod.SWEEP_LOCK_WAIT_S}")
                    cur.execute(f"DROP DATABASE `{name}`")
                except pymysql.MySQLError:
                    pass  # another client holds a lock in it: left for a later run
                finally:
                    try:
                        cur.execute(f"SET SESSION lock_wait_timeout = {sandbox_mod.DDL_LOCK_WAIT_S}")
                    except pymysql.MySQLError:
                        pass
        finally:
            for name in free:
                if name != self.sandbox:
                    try:
                        cur.execute("SELECT RELEASE_LOCK(%s)", (sandbox_mod.named_lock(name),))
                    except pymysql.MySQLError:
                        pass

    @staticmethod
    def _beats(cur, names) -> dict[str, tuple[int, int] | None]:
        """Each sandbox's heartbeat as (beat, seconds since by this node's clock); None: it
        has no heartbeat table.  Read causally (wsrep_sync_wait): the cluster's latest.
        A sandbox whose heartbeat cannot be read is left out (not provably gone)."""
        out: dict[str, tuple[int, int] | None] = {}
        for name in names:
            try:
                cur.execute(f"SELECT beat, TIMESTAMPDIFF(SECOND, at, UTC_TIMESTAMP()) FROM"
                            f" `{name}`.`{sandbox_mod.HEARTBEAT_TABLE}` WHERE id = 1")
                row = cur.fetchone()
                if row is not None:
                    out[name] = (int(row[0]), int(row[1]))
            except pymysql.MySQLError as exc:
                if error_parts(exc)[0] == 1146:  # ER_NO_SUCH_TABLE
                    out[name] = None
        return out

    def _gone(self, cur, free: dict[str, str]) -> set[str]:
        """Galera: which of these sandboxes (their named lock free on this node) belong to a
        run that is gone.  Its owner may be alive on another node, where its lock is: it is
        gone only if its heartbeat is STALE_S old by this node's clock and does not move while
        we watch it for WATCH_S (a clock ahead of ours only makes a gone run look alive
        longer).  A marked sandbox without a heartbeat table counts as gone only when its
        marker's start is UNBEATEN_S past (its owner died before making it)."""
        if not free:
            return set()
        try:
            cur.execute("SELECT @@SESSION.wsrep_sync_wait")
            sync_wait = int(cur.fetchone()[0])
            cur.execute("SET SESSION wsrep_sync_wait = 1")
        except pymysql.MySQLError:
            return set()
        try:
            first = self._beats(cur, free)
            gone = {name for name, beat in first.items() if beat is None
                    and (sandbox_mod.started_age_s(free[name]) or 0) > sandbox_mod.UNBEATEN_S}
            watched = {name: beat for name, beat in first.items()
                       if beat is not None and beat[1] >= sandbox_mod.STALE_S}
            if watched:
                time.sleep(sandbox_mod.WATCH_S)
                again = self._beats(cur, watched)
                gone |= {name for name, beat in watched.items()
                         if (later := again.get(name)) is not None and later[0] == beat[0]}
            return gone
        finally:
            try:
                cur.execute(f"SET SESSION wsrep_sync_wait = {sync_wait}")
            except pymysql.MySQLError:
                pass

    @staticmethod
    def _foreign_dependents(cur, name: str) -> list[str]:
        """Objects in other databases that use database ``name``: a foreign key to one of its
        tables, a view over one, a trigger, routine or event whose body names it.  DROP
        DATABASE would break them (a view or trigger fails from then on), or stop halfway
        (a foreign key: MariaDB drops the tables before the one it refuses)."""
        found: list[str] = []
        cur.execute(
            "SELECT DISTINCT CONSTRAINT_SCHEMA, TABLE_NAME, CONSTRAINT_NAME FROM information_schema.REFERENTIAL_CONSTRAINTS"
            " WHERE UNIQUE_CONSTRAINT_SCHEMA = %s AND CONSTRAINT_SCHEMA <> %s ORDER BY 1, 2, 3", (name, name))
        found += [f"foreign key {c} of table {d}.{t}" for d, t, c in cur.fetchall()]
        # the others name it in their text (a view's definition always qualifies its tables)
        like = "%" + name.replace("\\", "\\\\").replace("_", "\\_").replace("%", "\\%") + "%"
        mentions = re.compile(r"(?<![\w$])`?" + re.escape(name) + r"`?\s*\.", re.I)
        for kind, sql in (
                ("view", "SELECT TABLE_SCHEMA, TABLE_NAME, VIEW_DEFINITION FROM information_schema.VIEWS"
                         " WHERE TABLE_SCHEMA <> %s AND VIEW_DEFINITION LIKE %s"),
                ("trigger", "SELECT TRIGGER_SCHEMA, TRIGGER_NAME, ACTION_STATEMENT FROM information_schema.TRIGGERS"
                            " WHERE TRIGGER_SCHEMA <> %s AND ACTION_STATEMENT LIKE %s"),
                ("routine", "SELECT ROUTINE_SCHEMA, ROUTINE_NAME, ROUTINE_DEFINITION FROM information_schema.ROUTINES"
                            " WHERE ROUTINE_SCHEMA <> %s AND ROUTINE_DEFINITION LIKE %s"),
                ("event", "SELECT EVENT_SCHEMA, EVENT_NAME, EVENT_DEFINITION FROM information_schema.EVENTS"
                          " WHERE EVENT_SCHEMA <> %s AND EVENT_DEFINITION LIKE %s")):
            try:
                cur.execute(sql + " ORDER BY 1, 2", (name, like))
            except pymysql.MySQLError:
                continue  # (MySQL 8 keeps no EVENTS for some users)
            found += [f"{kind} {d}.{n}" for d, n, text in cur.fetchall() if mentions.search(str(text or ""))]
        return found

    @staticmethod
    def _end_connections(cur, name: str) -> None:
        """End the connections of a run that is gone (its sessions and monitor use its database)."""
        cur.execute("SELECT ID FROM information_schema.PROCESSLIST WHERE DB = %s AND ID <> CONNECTION_ID()", (name,))
        idents = [int(ident) for (ident,) in cur.fetchall()]
        for ident in idents:
            try:
                cur.execute(f"KILL CONNECTION {ident}")
            except pymysql.MySQLError:
                pass
        deadline = perf_counter_ns() + 2_000_000_000
        while idents and perf_counter_ns() < deadline:  # KILL only flags them: wait until they are gone
            cur.execute(f"SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID IN ({','.join(map(str, idents))})")
            if not int(cur.fetchone()[0]):
                break
            time.sleep(0.02)

    def _check_mine(self, cur) -> bool:
        """Whether our sandbox exists; refuses if it is no longer ours."""
        exists, comment = self._comment(cur, self.sandbox)
        if exists and self.marked and not self.target.owned and sandbox_mod.token_of(comment) != self.token:
            raise sandbox_mod.SandboxError(
                f"database {self.sandbox} is no longer this run's sandbox ({sandbox_mod.owner_text(comment)});"
                f" lockrace leaves it alone")
        return exists

    def _end_prepared_xa(self, cur) -> None:
        """Roll back the XA transactions this run's sessions prepared and left open."""
        for xid in sorted(self.prepared_xa):
            try:
                cur.execute(f"XA ROLLBACK {xid}")
            except pymysql.MySQLError:
                pass  # already ended, or not ours to end
            self.prepared_xa.discard(xid)

    def _blockers(self, cur) -> str:
        """Who holds a lock in our sandbox, as the server says: the holders of its metadata
        locks (MySQL: performance_schema.metadata_locks; MariaDB: METADATA_LOCK_INFO, where
        that plugin is loaded), and connections using it or running a statement naming it."""
        found: dict[int, str] = {}
        for sql in (
                "SELECT DISTINCT t.PROCESSLIST_ID, t.PROCESSLIST_USER FROM performance_schema.metadata_locks m"
                " JOIN performance_schema.threads t ON t.THREAD_ID = m.OWNER_THREAD_ID WHERE m.OBJECT_SCHEMA = %s"
                " AND m.LOCK_STATUS = 'GRANTED' AND t.PROCESSLIST_ID <> CONNECTION_ID()",
                "SELECT DISTINCT m.THREAD_ID, p.USER FROM information_schema.METADATA_LOCK_INFO m"
                " JOIN information_schema.PROCESSLIST p ON p.ID = m.THREAD_ID WHERE m.TABLE_SCHEMA = %s"
                " AND m.THREAD_ID <> CONNECTION_ID()"):
            try:
                cur.execute(sql, (self.sandbox,))
                found.update((int(i), str(u)) for i, u in cur.fetchall() if i is not None)
            except pymysql.MySQLError:
                pass  # no such view here (performance_schema off, the plugin not loaded)
        try:
            cur.execute("SELECT ID, USER FROM information_schema.PROCESSLIST"
                        " WHERE ID <> CONNECTION_ID() AND (DB = %s OR INFO LIKE %s)",
                        (self.sandbox, f"%{self.sandbox}%"))
            found.update((int(i), str(u)) for i, u in cur.fetchall())
        except pymysql.MySQLError:
            pass
        who = [f"connection {i} ({u})" for i, u in sorted(found.items())]
        try:
            cur.execute("XA RECOVER")
            if cur.fetchall():
                who.append("or a prepared XA transaction (XA RECOVER lists them; they keep their locks"
                           " after their connection ends: XA ROLLBACK ends one)")
        except pymysql.MySQLError:
            pass
        return ", ".join(who)

    def _bounded_ddl(self, conn: Connection, what: str, work) -> None:
        """Run ``work`` on our own sandbox, on an admin connection (bounded waits)."""
        cur = conn.cursor()
        if what != "drop" and not self.target.owned:
            self._check_owner(cur)
        exists = self._check_mine(cur)
        self._end_prepared_xa(cur)
        if exists and not self.target.owned:
            dependents = self._foreign_dependents(cur, self.sandbox)
            if dependents:
                raise sandbox_mod.SandboxError(sandbox_mod.foreign_dependents(
                    what, "database", self.sandbox, dependents, self.marked))
        try:
            work(cur, exists)
        except pymysql.MySQLError as exc:
            errno, message = error_parts(exc)
            if errno not in (1205, 1969, 3024):  # lock wait timeout, statement timeouts
                raise sandbox_mod.SandboxError(
                    f"could not {what} the sandbox database {self.sandbox}: {message}") from None
            who = self._blockers(cur)
            raise sandbox_mod.SandboxError(
                f"could not {what} the sandbox database {self.sandbox}: another client holds a lock in it"
                + (f" ({who})" if who else "") + f" and lockrace waits at most {sandbox_mod.DDL_LOCK_WAIT_S} s;"
                " the database is left in place" + sandbox_mod.left_for("database", self.sandbox, "that lock is gone",
                                                                        self.marked)
            ) from None

    # ------------------------------------------------------------ connections

    async def connect_session(self, name: str) -> MySQLSession:
        threaded = self.threaded_reads()
        conn = await self.connect(role="session")
        self.session_idents.add(conn.thread_id())
        session = MySQLSession(conn, name, self.dialect, self.prepared_xa, self.budget_prefix)
        session.threaded = threaded
        session.rollback_on_timeout = self.rollback_on_timeout
        return session

    async def connect_monitor(self) -> MySQLMonitor:
        monitor = MySQLMonitor(await self.connect(role="monitor"), self.dialect, self.sandbox, self.has_mdl_info,
                               self.session_idents)
        monitor.performance_schema = self.performance_schema
        return monitor

    async def run_admin(self, sqls: list[str]) -> None:
        conn = await self.connect(role="admin")

        def work():
            cur = conn.cursor()
            for text in sqls:
                if text.strip():
                    cur.execute(text)
                    while cur.nextset():
                        pass

        try:
            await self._admin_call(conn, work)
        finally:
            await _close_bounded(conn)

    async def reset_sandbox(self) -> None:
        await self._ensure_owner()

        def work(cur, exists: bool):
            if not exists:
                if self.target.owned:
                    cur.execute(f"CREATE DATABASE IF NOT EXISTS `{self.sandbox}`")
                else:
                    self._create(cur.connection)
                return
            cur.execute(
                "SELECT TABLE_NAME, TABLE_TYPE FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s", (self.sandbox,)
            )
            objects = cur.fetchall()
            cur.execute("SET FOREIGN_KEY_CHECKS = 0")
            for name, kind in objects:
                if self.galera and name == sandbox_mod.HEARTBEAT_TABLE:
                    continue  # this run's heartbeat: it stays while the run lives
                what = "VIEW" if kind == "VIEW" else "TABLE"
                cur.execute(f"DROP {what} IF EXISTS `{self.sandbox}`.`{name}`")
            cur.execute("SET FOREIGN_KEY_CHECKS = 1")
            # a scenario's stored functions and procedures go too: its setup creates them anew
            cur.execute("SELECT ROUTINE_NAME, ROUTINE_TYPE FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = %s"
                        " AND ROUTINE_TYPE IN ('FUNCTION', 'PROCEDURE')", (self.sandbox,))
            for name, kind in cur.fetchall():
                if kind == "PROCEDURE" and name == sandbox_mod.MARKER_ROUTINE and not self.target.owned:
                    continue  # the sandbox's mark: it stays while the run lives
                cur.execute(f"DROP {kind} IF EXISTS `{self.sandbox}`.`{name.replace('`', '``')}`")

        await self._sandbox_ddl("empty", work)

    async def _sandbox_ddl(self, what: str, work) -> None:
        conn = await self.connect(None, role="admin")
        try:
            await self._admin_call(conn, lambda: self._bounded_ddl(conn, what, work))
        finally:
            await _close_bounded(conn)

    async def drop_sandbox(self) -> None:
        def work(cur, exists: bool):
            if exists:
                cur.execute(f"DROP DATABASE IF EXISTS `{self.sandbox}`")

        beat, self.heartbeat = self.heartbeat, None
        if beat is not None:
            await _run(beat.stop)
        try:
            await self._sandbox_ddl("drop", work)
        finally:
            owner, self.owner = self.owner, None
            if owner is not None:
                await _run(owner.close)


class _Heartbeat(threading.Thread):
    """Galera: the owner's heartbeat, a replicated row in its sandbox updated every BEAT_S
    on a connection of its own (bounded: a node that stalls writes makes it miss a beat,
    never hang), so that a lockrace on another node sees that this run is alive."""

    def __init__(self, backend: MySQLBackend):
        super().__init__(name=f"lockrace-heartbeat-{backend.sandbox}", daemon=True)
        self.backend = backend
        self.sql = (f"UPDATE `{backend.sandbox}`.`{sandbox_mod.HEARTBEAT_TABLE}`"
                    " SET beat = beat + 1, at = UTC_TIMESTAMP(6) WHERE id = 1")
        self._stopping = threading.Event()

    def run(self) -> None:
        conn = None
        while not self._stopping.wait(sandbox_mod.BEAT_S):
            try:
                if conn is None:
                    conn = self.backend.connect_blocking(None, role="heartbeat")
                conn.query(self.sql)
            except Exception:  # missed: the next beat tries again, on a new connection
                if conn is not None:
                    with contextlib.suppress(Exception):
                        conn.close()
                conn = None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def stop(self) -> None:
        self._stopping.set()
        self.join(10)
