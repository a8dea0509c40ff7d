"""A race: named sessions on one server plus the monitor that watches them.

The Race is what the app, the CLI and the tests drive.  It runs statements,
asks the server (never the clock) who is blocked by whom, cancels, rolls
back, reconnects and cleans up, and tells its listeners everything as events.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from time import perf_counter_ns
from typing import Callable, Iterable

from ..backends.base import Backend, MonitorConnection, count_skipped, skip_probe
from .events import (
    Event,
    ServerNote,
    SessionState,
    StatementBlocked,
    StatementFinished,
    StatementResult,
    StatementStarted,
    StatementUnblocked,
)
from .outcome import asks_skip_locked, with_skip
from .session import RunningStatement, Session

SKIP_PROBE_ROWS = 1000  # rows beyond a SKIP LOCKED read's LIMIT that its probe may read

Listener = Callable[[Event], None]

# Statements after which the wait budgets are read back from the server.
_BUDGET_TOUCHING = re.compile(r"\b(SET|RESET|COMMIT|ROLLBACK|ABORT|END|BEGIN|START|DISCARD)\b", re.IGNORECASE)

POLL_S = 0.004  # while some running statement is not yet known to be blocked
POLL_BLOCKED_S = 0.1  # while every running statement is already blocked (blocker changes)
# (MariaDB's monitor spaces its own reads further apart: backends/mysql.py)


class SessionBusy(Exception):
    pass


class Race:
    def __init__(self, backend: Backend, names: Iterable[str] = ("A", "B", "C", "D")):
        self.backend = backend
        self.names = list(names)
        self.sessions: dict[str, Session] = {}
        self.monitor: MonitorConnection | None = None
        self._listeners: list[Listener] = []
        self._next_id = 0
        self._wake = asyncio.Event()
        self._watcher: asyncio.Task | None = None
        self.monitor_error: str = ""
        self._lost_probe: asyncio.Task | None = None

    # ------------------------------------------------------------ listeners
    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def unsubscribe(self, listener: Listener) -> None:
        with contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    def emit(self, event: Event) -> None:
        for listener in list(self._listeners):
            listener(event)

    # ------------------------------------------------------------ lifecycle
    async def open(self) -> "Race":
        self.monitor = await self.backend.connect_monitor()
        conns = await asyncio.gather(*(self.backend.connect_session(n) for n in self.names), return_exceptions=True)
        failure = next((c for c in conns if isinstance(c, BaseException)), None)
        if failure is not None:
            for c in conns:
                if not isinstance(c, BaseException):
                    await c.close()
            await self.monitor.close()
            raise failure
        for name, conn in zip(self.names, conns):
            self.sessions[name] = Session(name, conn, self.backend.flavor)
        await asyncio.gather(*(self._refresh_state(s, budgets=True) for s in self.sessions.values()))
        self._watcher = asyncio.create_task(self._watch(), name="lockrace-watcher")
        return self

    async def add_session(self, name: str) -> Session:
        if name in self.sessions:
            return self.sessions[name]
        conn = await self.backend.connect_session(name)
        session = Session(name, conn, self.backend.flavor)
        self.sessions[name] = session
        self.names.append(name)
        await self._refresh_state(session, budgets=True)
        return session

    async def close(self, grace: float = 2.0) -> None:
        """Cancel what runs, roll back what is open, close every connection."""
        self._stop_lost_probe()
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._watcher
            self._watcher = None
        running = [s for s in self.sessions.values() if s.running]
        if self.monitor is not None:
            for s in running:
                with contextlib.suppress(Exception):
                    await self.monitor.cancel(s.ident)
        waits = [s.running.done.wait() for s in running if s.running and s.running.task]
        if waits:  # one grace period for all of them, not one each
            with contextlib.suppress(asyncio.TimeoutError, Exception):
                await asyncio.wait_for(asyncio.gather(*waits), grace)
        stuck = [s for s in self.sessions.values() if s.running]
        if stuck and self.monitor is not None:
            for s in stuck:
                with contextlib.suppress(Exception):
                    await self.monitor.terminate(s.ident)
        for s in self.sessions.values():
            if not s.running and not s.conn.closed and s.txn != "idle":
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(s.conn.execute("ROLLBACK"), grace)
        for s in self.sessions.values():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(s.conn.close(), grace)
        for s in self.sessions.values():
            if s.running and s.running.task:
                s.running.task.cancel()
        if self.monitor is not None:
            with contextlib.suppress(Exception):
                await self.monitor.close()
            self.monitor = None

    async def reconnect(self) -> None:
        """New connections for every session (after a server restart)."""
        self._stop_lost_probe()
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._watcher
        for s in self.sessions.values():
            with contextlib.suppress(Exception):
                await s.conn.close()
        if self.monitor is not None:
            with contextlib.suppress(Exception):
                await self.monitor.close()
        old = dict(self.sessions)
        self.sessions.clear()
        self.monitor = None
        self.monitor_error = ""
        try:
            await self.open()
        except Exception:
            # the server is not back yet: keep the old sessions (closed, they answer
            # connection_lost) so that the race stays usable and can try again
            self.sessions.update(old)
            for s in old.values():
                s.txn = "closed"
            raise
        self.emit(ServerNote("", perf_counter_ns(), f"reconnected to {self.backend.server_name}"))

    # ------------------------------------------------------------ statements
    def submit(self, name: str, sql: str) -> RunningStatement:
        """Start ``sql`` in session ``name``; returns at once."""
        session = self.sessions[name]
        if session.running is not None:
            raise SessionBusy(f"session {name} is still running a statement")
        self._next_id += 1
        stmt = RunningStatement(self._next_id, sql, perf_counter_ns(), session.budget_for(sql))
        session.running = stmt
        stmt.task = asyncio.create_task(self._execute(session, stmt), name=f"lockrace-{name}-{stmt.stmt_id}")
        return stmt

    async def run(self, name: str, sql: str) -> StatementResult:
        stmt = self.submit(name, sql)
        await stmt.done.wait()
        assert stmt.result is not None
        return stmt.result

    async def _execute(self, session: Session, stmt: RunningStatement) -> None:
        self.emit(StatementStarted(session.name, stmt.started_ns, stmt.stmt_id, stmt.sql, stmt.budget))
        self._wake.set()
        try:
            if session.conn.closed:
                result = StatementResult("connection_lost", message="the connection is closed; reconnect first")
            else:
                result = await session.conn.execute(stmt.sql)
        except asyncio.CancelledError:
            result = StatementResult("cancelled", message="cancelled while closing")
            self._finish(session, stmt, result)
            raise
        except Exception as exc:  # a driver failure we did not foresee: report, don't crash
            result = StatementResult("error", message=f"{type(exc).__name__}: {exc}")
        # the answer's own time, not when this coroutine got the loop back
        end = result.started_ns + result.elapsed_ns if result.started_ns else perf_counter_ns()
        if stmt.blocked_since is not None:
            stmt.waited_ns += end - stmt.blocked_since
            stmt.blocked_since = None
        result.waited_ns = stmt.waited_ns
        result.blocked_by = stmt.blockers
        result.lock = stmt.lock
        result.budget = stmt.budget
        if result.outcome == "ok" and asks_skip_locked(stmt.sql):
            await self._account_skipped(session, stmt.sql, result)
        stmt.result = result
        session.last = result
        self.emit(StatementFinished(session.name, perf_counter_ns(), stmt.stmt_id, stmt.sql, result))
        # The session stays busy until its state is read back: one connection,
        # one request at a time (PyMySQL connections are not thread-safe).
        await self._refresh_state(session, budgets=bool(_BUDGET_TOUCHING.search(stmt.sql)))
        self._release(session, stmt)
        if result.outcome == "connection_lost" and self._lost_probe is None:
            self._lost_probe = asyncio.create_task(self._probe_server(session), name="lockrace-lost-probe")

    async def _probe_server(self, first: Session) -> None:
        """One session lost its connection: is the server gone, or just that backend?

        A fresh connection answers without touching any session's connection.
        If the server cannot be reached, every other idle session is marked
        closed at once (listeners show "connection lost" everywhere), instead of
        each finding out on its next statement.
        """
        try:
            try:
                probe = await asyncio.wait_for(self.backend.connect_monitor(), 5)
            except Exception:
                reachable = False
            else:
                reachable = True
                with contextlib.suppress(Exception):
                    await probe.close()
            if reachable:
                return
            self.emit(ServerNote("", perf_counter_ns(), f"lost the connection to {self.backend.server_name}", "error"))
            for s in list(self.sessions.values()):
                if s is not first and s.running is None and s.txn != "closed":
                    s.txn = "closed"
                    self.emit(SessionState(s.name, perf_counter_ns(), "closed", s.budgets, s.ident))
        finally:
            self._lost_probe = None

    def _stop_lost_probe(self) -> None:
        if self._lost_probe is not None:
            self._lost_probe.cancel()
            self._lost_probe = None

    def _finish(self, session: Session, stmt: RunningStatement, result: StatementResult) -> None:
        stmt.result = result
        session.last = result
        self.emit(StatementFinished(session.name, perf_counter_ns(), stmt.stmt_id, stmt.sql, result))
        self._release(session, stmt)

    def _release(self, session: Session, stmt: RunningStatement) -> None:
        if session.running is stmt:
            session.running = None
        stmt.done.set()
        stmt.blocked.set()  # wake anyone waiting for "blocked or done"

    async def _account_skipped(self, session: Session, sql_text: str, result: StatementResult) -> None:
        probe = skip_probe(sql_text)
        if probe is None or self.monitor is None or result.truncated:
            return  # a read too large to keep whole is not compared row by row
        sql, limit, table = probe
        bound = (limit or 0) + SKIP_PROBE_ROWS  # the probe reads a bounded number of rows too
        try:
            plain = await self.monitor.plain_read(f"{sql} LIMIT {bound}")
            if plain is None:
                return
            if len(plain) >= bound and (limit is None or not result.rows or result.rows[-1] not in plain):
                return  # the probe stopped short of what the read passed: no count rather than a wrong one
            result.skipped_rows = count_skipped(plain, result.rows, limit)
            if result.skipped_rows and table:
                holders = await self.monitor.row_lock_holders(table, session.ident)
                result.skipped_from = tuple(sorted(self.name_of(i) for i in holders.holders))
        except Exception as exc:
            self.emit(ServerNote(session.name, perf_counter_ns(), f"could not count skipped rows: {exc}", "warning"))
            return
        result.outcome = with_skip(result.outcome, sql_text, result.skipped_rows)

    async def _refresh_state(self, session: Session, budgets: bool) -> None:
        try:
            txn = await session.conn.txn_state()
            if budgets or not session.budgets or txn != session.txn:
                fresh = await session.conn.budgets()
                if fresh:
                    session.budgets = fresh
        except Exception:
            txn = "closed" if session.conn.closed else session.txn
        session.txn = txn
        self.emit(SessionState(session.name, perf_counter_ns(), txn, session.budgets, session.ident))

    async def cancel(self, name: str) -> bool:
        """Ask the server to cancel the statement running in session ``name``."""
        session = self.sessions[name]
        if session.running is None or self.monitor is None:
            return False
        return await self.monitor.cancel(session.ident)

    async def rollback(self, name: str) -> StatementResult | None:
        session = self.sessions[name]
        if session.running is not None:
            await self.cancel(name)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(session.running.done.wait(), 5)
        if session.running is not None:
            return None
        return await self.run(name, "ROLLBACK")

    # ------------------------------------------------------------ waits
    def name_of(self, ident: int) -> str:
        for s in self.sessions.values():
            if s.ident == ident:
                return s.name
        return f"pid {ident}" if self.backend.engine == "postgres" else f"thread {ident}"

    async def poll_waits(self) -> None:
        """Ask the server now who waits on whom, and emit what changed."""
        running = [s for s in self.sessions.values() if s.running is not None]
        if not running or self.monitor is None:
            return
        asked = {s.name: s.running for s in running}
        reports = await self.monitor.waits([s.ident for s in running])
        now = perf_counter_ns()
        for s in running:
            stmt = s.running
            if stmt is None or stmt.result is not None or stmt is not asked[s.name]:
                continue  # finished while we asked: the answer is about that statement, not a newer one
            report = reports.get(s.ident)
            if report is not None:
                blockers = tuple(self.name_of(i) for i in report.blockers)
                if stmt.blocked_since is None or blockers != stmt.blockers or report.lock != stmt.lock:
                    if stmt.blocked_since is None:
                        stmt.blocked_since = now
                        if report.waiting_s is not None:
                            # the server says when the wait began (PostgreSQL 14+)
                            stmt.blocked_since = max(stmt.started_ns, now - int(report.waiting_s * 1e9))
                    stmt.blockers = blockers or stmt.blockers
                    stmt.lock = report.lock or stmt.lock
                    stmt.ever_blocked = True
                    self.emit(StatementBlocked(s.name, now, stmt.stmt_id, stmt.blockers, stmt.lock, stmt.started_ns))
                    stmt.blocked.set()
            elif stmt.blocked_since is not None and stmt.result is None:
                stmt.waited_ns += now - stmt.blocked_since
                stmt.blocked_since = None
                stmt.blocked.clear()
                self.emit(StatementUnblocked(s.name, now, stmt.stmt_id))

    async def _watch(self) -> None:
        failures = 0
        while True:
            self._wake.clear()  # a submit from here on wakes the next wait at once
            running = [s for s in self.sessions.values() if s.running is not None]
            if not running:
                await self._wake.wait()
                continue
            try:
                await self.poll_waits()
                failures = 0
                self.monitor_error = ""
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failures += 1
                self.monitor_error = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                if failures == 1:
                    self.emit(ServerNote("", perf_counter_ns(), f"monitor: {self.monitor_error}", "error"))
                await asyncio.sleep(min(0.5, 0.02 * failures))
                continue
            all_blocked = all(s.running is not None and s.running.blocked_since is not None for s in running)
            if all_blocked:
                # Nothing new to learn quickly: a finish arrives as the statement's
                # own answer, and a new statement wakes this wait at once.
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), POLL_BLOCKED_S)
            else:
                await asyncio.sleep(POLL_S)

    async def wait_blocked_or_done(self, stmt: RunningStatement, timeout: float) -> bool:
        """True once the server reports ``stmt`` blocked or it finished."""
        try:
            await asyncio.wait_for(stmt.blocked.wait(), timeout)
            return True
        except asyncio.TimeoutError:
            return False

