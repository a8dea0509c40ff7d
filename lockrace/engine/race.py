"""A race: named sessions on one server plus the monitor that watches them.

The Race is what the app, the CLI and the tests drive.  It runs statements,
asks the server (never the clock) who is blocked by whom, cancels, rolls
back, reconnects and cleans up, and tells its listeners everything as events.

On a cluster (a ``ClusterBackend``: one backend per node) each session sits
on a node (``placement``), each node gets its own monitor connection, and
waits, cancels, skipped rows and session idents are all asked of and mapped
on the session's own node; events carry the node.  On a single server there
is one monitor under the node name "".
"""

from __future__ import annotations

import asyncio
from functools import partial
import contextlib
import re
from time import perf_counter_ns
from typing import TYPE_CHECKING, Callable, Iterable, cast

from ..backends.base import Backend, ConnectError, MonitorConnection, NoProbe, count_passed_over, skip_probe
from ..core.events import (
    NO_MDL_INFO,
    Budget,
    STANDBY_BUDGET,
    Event,
    ServerNote,
    SessionState,
    StatementBlocked,
    StatementExplained,
    StatementFinished,
    StatementResult,
    StatementStarted,
    StatementUnblocked,
)
from ..core import prepared as prepared_mod
from ..core.outcome import asks_skip_locked, with_skip
from ..core.states import TxnState
from . import explain as explain_mod
from .budget_book import BudgetBook
from .session import RunningStatement, Session

if TYPE_CHECKING:
    from ..backends.cluster import ClusterBackend

SKIP_PROBE_ROWS = 1000  # rows beyond a SKIP LOCKED read's LIMIT that its probe may read

Listener = Callable[[Event], None]

# Statements after which the session's wait budgets may differ (its BudgetBook follows them).
_BUDGET_TOUCHING = re.compile(r"\b(SET|RESET|COMMIT|ROLLBACK|ABORT|END|BEGIN|START|DISCARD|SET_CONFIG|SAVEPOINT"
                              r"|RELEASE|PREPARE)\b", re.IGNORECASE)

_WRITES = re.compile(r"^\s*(INSERT|UPDATE|DELETE|REPLACE|WITH)\b", re.IGNORECASE)
# statements that ask for an exclusive metadata lock: while one waits for it, later
# requests on the table (even plain reads) queue behind it
_EXCLUSIVE_MDL = re.compile(r"^\s*(ALTER|DROP|TRUNCATE|RENAME|OPTIMIZE|CREATE\s+(UNIQUE\s+|FULLTEXT\s+|SPATIAL\s+)?INDEX)\b",
                            re.IGNORECASE)

_TOO_MANY = re.compile(r"too many|connection slots are reserved|max_user_connections|connection limit", re.IGNORECASE)

CANCEL_S = 5.0  # a cancel or a skip count the server has not answered by then is given up

POLL_S = 0.004  # while some running statement is not yet known to be blocked
# A statement's task starts once the loop has slept after the send (epoll's resolution: 1 ms),
# or at once when the answer comes first.  On a small machine the server's backend is woken on
# lockrace's own CPU (a socket write is a "sync" wake-up: the kernel expects the writer to sleep
# next), so whatever lockrace does before it sleeps delays the server's answer by as much.
_LAUNCH_AFTER_S = 0.001
# PostgreSQL's lock errors: lock_not_available (NOWAIT, lock_timeout), query_canceled
# (statement_timeout), deadlock_detected
_LOCK_ERROR_STATES = frozenset({"55P03", "57014", "40P01"})
_NOWAIT = Budget("NOWAIT", 0.0)
POLL_BLOCKED_S = 0.1  # while every running statement is already blocked (blocker changes)
# (MariaDB's monitor spaces its own reads further apart: backends/mysql.py)


class SessionBusy(Exception):
    pass


class Race:
    def __init__(self, backend: Backend, names: Iterable[str] = ("A", "B", "C", "D"),
                 placement: dict[str, str] | None = None):
        self.backend = backend
        self.names = list(names)
        self.sessions: dict[str, Session] = {}
        self.monitor: MonitorConnection | None = None
        """The (first node's) monitor; on a cluster every node's is in ``monitors``."""
        self.nodes: dict[str, Backend] | None = getattr(backend, "nodes", None)
        self.cluster: ClusterBackend | None = cast("ClusterBackend", backend) if self.nodes is not None else None
        """A cluster (backends/cluster.py: its nodes, topology and hooks); None on a single server."""
        self.placement: dict[str, str] = dict(placement or {})
        self.monitors: dict[str, MonitorConnection] = {}
        self._listeners: list[Listener] = []
        self._next_id = 0
        self._wake = asyncio.Event()
        self._watcher: asyncio.Task | None = None
        self.monitor_error: str = ""
        self._lost_probe: asyncio.Task | None = None
        self.prepared: dict[str, str] = {}  # prepared transaction (gid / xid as written) -> session that prepared it

    # ------------------------------------------------------------ listeners
    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def unsubscribe(self, listener: Listener) -> None:
        with contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    def emit(self, event: Event) -> None:
        for listener in list(self._listeners):
            listener(event)

    # ------------------------------------------------------------ nodes
    @property
    def _cluster(self) -> ClusterBackend:
        assert self.cluster is not None, "cluster races only"
        return self.cluster

    def node_for(self, name: str) -> str:
        """The node session ``name`` sits on ("" on a single server)."""
        if self.nodes is None:
            return ""
        node = self.placement.get(name)
        if node not in self.nodes:
            from ..registry import CLUSTER_NODES as TOPOLOGIES, default_node

            known = list(self.nodes)
            if self._cluster.topology in TOPOLOGIES and len(known) == len(TOPOLOGIES[self._cluster.topology]):
                node = default_node(self._cluster.topology, name, self.names.index(name) if name in self.names else 0)
            else:
                node = known[0]
            self.placement[name] = node
        return node

    def _backend_for(self, node: str) -> Backend:
        return self.nodes[node] if self.nodes is not None else self.backend

    def monitor_for(self, session: Session) -> MonitorConnection | None:
        return self.monitors.get(session.node, self.monitor)

    async def _open_monitors(self) -> None:
        if self.nodes is None:
            self.monitor = await self.backend.connect_monitor()
            self.monitors = {"": self.monitor}
            return
        names = list(self.nodes)
        got = await asyncio.gather(*(self.nodes[n].connect_monitor() for n in names), return_exceptions=True)
        failure = next((m for m in got if isinstance(m, BaseException)), None)
        if failure is not None:
            for m in got:
                if not isinstance(m, BaseException):
                    await m.close()
            raise failure
        self.monitors = dict(zip(names, [m for m in got if not isinstance(m, BaseException)]))
        self.monitor = self.monitors[names[0]]
        for node, monitor in self.monitors.items():
            await self._cluster.hooks.node_opened(self._cluster, node, monitor)

    async def _close_monitors(self) -> None:
        for monitor in set(self.monitors.values()) | ({self.monitor} if self.monitor else set()):
            with contextlib.suppress(Exception):
                await monitor.close()
        self.monitors = {}
        self.monitor = None

    # ------------------------------------------------------------ lifecycle
    async def open(self) -> "Race":
        await self._open_monitors()
        nodes = [self.node_for(n) for n in self.names]
        conns = await asyncio.gather(*(self._backend_for(node).connect_session(n) for n, node in zip(self.names, nodes)),
                                     return_exceptions=True)
        failure = next((c for c in conns if isinstance(c, BaseException)), None)
        if failure is not None:
            for c in conns:
                if not isinstance(c, BaseException):
                    await c.close()
            await self._close_monitors()
            if isinstance(failure, ConnectError) and _TOO_MANY.search(str(failure)):
                # more sessions than the server accepts (max_connections, a per-role limit)
                raise ConnectError(f"{failure}; this race needs {len(self.names) + 1} connections"
                                   f" ({len(self.names)} sessions and a monitor) at once") from None
            raise failure
        opened = [c for c in conns if not isinstance(c, BaseException)]
        for name, node, conn in zip(self.names, nodes, opened):
            self.sessions[name] = Session(name, conn, self.backend.flavor, node)
        await asyncio.gather(*(self._refresh_state(s) for s in self.sessions.values()))
        self._watcher = asyncio.create_task(self._watch(), name="lockrace-watcher")
        return self

    async def add_session(self, name: str) -> Session:
        if name in self.sessions:
            return self.sessions[name]
        self.names.append(name)
        node = self.node_for(name)
        try:
            conn = await self._backend_for(node).connect_session(name)
        except BaseException:
            self.names.remove(name)
            raise
        session = Session(name, conn, self.backend.flavor, node)
        self.sessions[name] = session
        await self._refresh_state(session)
        return session

    async def close(self, grace: float = 2.0) -> None:
        """Cancel what runs, roll back what is open (prepared transactions too),
        close every connection.  Every step is bounded by ``grace`` seconds, so
        a server that does not answer (frozen, unreachable) cannot hold it.  A
        caller cancelled while it closes (a screen torn down twice) still has
        it finish: no connection is left open; the cancel is raised after."""
        closing = asyncio.ensure_future(self._close(grace))
        cancelled = False
        while not closing.done():
            try:
                await asyncio.shield(closing)
            except asyncio.CancelledError:
                cancelled = True
        closing.result()
        if cancelled:
            raise asyncio.CancelledError

    async def _close(self, grace: float) -> None:
        self._stop_lost_probe()
        for s in self.sessions.values():
            if s.running is not None and s.running.task is None:
                self._launch(s, s.running)  # a statement just sent: its task reads it to its end
        if self._watcher is not None:
            self._watcher.cancel()
            await asyncio.wait({self._watcher}, timeout=grace)
            self._watcher = None
        running = [s for s in self.sessions.values() if s.running]
        for node in {s.node for s in running}:
            monitor = self.monitors.get(node, self.monitor)
            if monitor is not None and monitor.closed:
                await _bounded(self._replace_monitor(node), grace)
        cancels = [m.cancel(s.ident) for s in running if (m := self.monitor_for(s)) is not None]
        if cancels:
            await _bounded(asyncio.gather(*cancels, return_exceptions=True), grace)
        waits = [s.running.done.wait() for s in running if s.running and s.running.task]
        if waits:  # one grace period for all of them, not one each
            await _bounded(asyncio.gather(*waits), grace)
        stuck = [s for s in self.sessions.values() if s.running]
        ends = [m.terminate(s.ident) for s in stuck if (m := self.monitor_for(s)) is not None]
        if ends:
            await _bounded(asyncio.gather(*ends, return_exceptions=True), grace)
        await self.release_prepared(grace)
        rollbacks = [s.conn.execute("ROLLBACK") for s in self.sessions.values()
                     if not s.running and not s.conn.closed and s.txn != "idle"]
        if rollbacks:
            await _bounded(asyncio.gather(*rollbacks, return_exceptions=True), grace)
        await _bounded(asyncio.gather(*(s.conn.close() for s in self.sessions.values()), return_exceptions=True), grace)
        for s in self.sessions.values():
            if s.running and s.running.task:
                s.running.task.cancel()
        await _bounded(self._close_monitors(), grace)

    async def release_prepared(self, timeout: float = 2.0) -> list[str]:
        """Roll back the prepared transactions this race's sessions left behind
        (PREPARE TRANSACTION / XA PREPARE without COMMIT/ROLLBACK PREPARED).

        MariaDB/MySQL: on the session that prepared it when that connection still
        works (only the owner may finish an attached XA transaction), otherwise (and
        on PostgreSQL always) on a short-lived connection of its own.  Returns what could not be rolled back.
        """
        left = []
        for gid, name in list(self.prepared.items()):
            sql = f"ROLLBACK PREPARED {gid}" if self.backend.engine == "postgres" else f"XA ROLLBACK {gid}"
            session = self.sessions.get(name)
            try:
                if self.backend.engine == "mysql" and session is not None and session.running is None \
                        and not session.conn.closed:
                    res = await _within(session.conn.execute(sql), timeout)
                    if res.outcome == "connection_lost":
                        await _within(self.backend.run_admin([sql]), timeout)
                else:
                    await _within(self.backend.run_admin([sql]), timeout)
            except (asyncio.TimeoutError, ConnectError, OSError):
                left.append(gid)  # the server did not answer: it is still there
                continue
            except Exception:
                pass  # the server answered (e.g. no such prepared transaction any more)
            self.prepared.pop(gid, None)
        return left

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
        await self._close_monitors()
        old = dict(self.sessions)
        self.sessions.clear()
        self.monitor_error = ""
        try:
            await self.open()
        except Exception:
            # the server is not back yet: keep the old sessions (closed, they answer
            # connection_lost) so that the race stays usable and can try again
            self.sessions.update(old)
            for s in old.values():
                s.txn = TxnState.CLOSED
            raise
        self.emit(ServerNote("", perf_counter_ns(), f"reconnected to {self.backend.server_name}"))

    # ------------------------------------------------------------ statements
    def submit(self, name: str, sql: str) -> RunningStatement:
        """Start ``sql`` in session ``name``; returns at once.  A session whose last
        statement has its answer but is still being asked about (a refusal's holder)
        takes the new one right after that."""
        session = self.sessions[name]
        previous = session.running
        if previous is not None and not previous.answered.is_set():
            raise SessionBusy(f"session {name} is still running a statement")
        self._next_id += 1
        stmt_id, started_ns = self._next_id, perf_counter_ns()
        announced = previous is None and self.nodes is None and "\x00" not in sql
        heard = announced and bool(self._listeners)  # listeners hear of it with its budget, before the send
        budget = session.budget_for(sql) if heard else None
        sent = None
        if announced:
            # Before the send, only what must precede it: the listeners hear of the
            # statement first, in the order statements are started (their work is done
            # before the server gets it, not while it needs the CPU: see
            # _LAUNCH_AFTER_S).  Then it is on its way to the server before anything
            # else happens (a cluster's node may first have to prepare: see _before);
            # the answer comes on a later turn of the loop.
            if heard:
                self.emit(StatementStarted(session.name, started_ns, stmt_id, sql, budget, node=session.node))
            sent = session.conn.send(sql, partial(self._on_answer, session, stmt_id))  # None: closed, busy
        stmt = RunningStatement(stmt_id, sql, started_ns, budget if heard else session.budget_for(sql))
        stmt.announced, stmt.sent = announced, sent
        session.running = stmt
        if stmt.sent is not None:
            # the task starts once the loop has slept, or as the answer is in (read on the
            # loop or on the session's thread), whichever is first: after the caller's turn
            stmt.launch = asyncio.get_running_loop().call_later(_LAUNCH_AFTER_S, self._launch, session, stmt, previous)
            stmt.on_sent = lambda _: self._launch(session, stmt, previous)
            stmt.sent.add_done_callback(stmt.on_sent)
        else:
            self._launch(session, stmt, previous)
        return stmt

    def _launch(self, session: Session, stmt: RunningStatement, previous: RunningStatement | None = None) -> None:
        """Start the statement's task (it reads the answer, tells the listeners, asks
        what is to be asked after it)."""
        if stmt.task is not None:
            return
        if stmt.launch is not None:
            stmt.launch.cancel()
            stmt.launch = None
        # launched: the answer has no task to start (one callback less on its way)
        if stmt.on_sent is not None and stmt.sent is not None:
            stmt.sent.remove_done_callback(stmt.on_sent)
            stmt.on_sent = None
        self._read_text(session, stmt)
        stmt.task = asyncio.create_task(self._execute(session, stmt, previous),
                                        name=f"lockrace-{session.name}-{stmt.stmt_id}")

    def _read_text(self, session: Session, stmt: RunningStatement) -> None:
        """What taking the answer in needs to know of the statement's text."""
        if stmt.text_read:
            return
        stmt.text_read = True
        sql = stmt.sql
        stmt.touches_budgets = bool(_BUDGET_TOUCHING.search(sql))
        upper = sql.upper()
        stmt.may_prepare = "PREPARE" in upper or "XA" in upper
        stmt.skip_locked = asks_skip_locked(sql)

    async def run(self, name: str, sql: str) -> StatementResult:
        """Run ``sql`` in session ``name``; returns as soon as the server's answer is in.

        An answer that needs nothing more from the server reaches the caller from
        the driver's own look (see ``_on_answer``); the listeners hear of it on the
        loop's next turn.  Who holds the lock a refused statement wanted is a
        further question to the server, asked after the answer: it lands in the
        same result (``held_by``, and a ``StatementExplained`` event) before the
        session takes its next statement; ``settled`` waits for all of it."""
        stmt = self.submit(name, sql)
        if not stmt.answered.is_set():
            # a future of its own, not the Event's wait: the answer reaches the caller
            # with a few lines of Python less (see _answered)
            stmt.waiter = asyncio.get_running_loop().create_future()
            await stmt.waiter
        assert stmt.result is not None
        return stmt.result

    async def settled(self, name: str) -> None:
        """Wait until session ``name`` is free: its statement answered and everything
        asked after the answer (``held_by``) is in."""
        stmt = self.sessions[name].running
        if stmt is not None:
            await stmt.done.wait()

    async def _execute(self, session: Session, stmt: RunningStatement, previous: RunningStatement | None = None) -> None:
        if previous is not None:
            try:
                await previous.done.wait()  # one connection, one request at a time
            except asyncio.CancelledError:
                self._finish(session, stmt, StatementResult("cancelled", message="cancelled while closing"))
                raise
            stmt.started_ns = perf_counter_ns()
        refused = await self._before(session, stmt.sql) if self.nodes is not None else None
        if not stmt.announced:
            self.emit(StatementStarted(session.name, stmt.started_ns, stmt.stmt_id, stmt.sql, stmt.budget,
                                       node=session.node))
        # the watcher's first look is due once the statement has reached the server: woken
        # then, it stays out of the way of an answer that comes sooner (a NOWAIT refusal)
        first_look = self._first_poll_s(session)
        if first_look > 0:
            asyncio.get_running_loop().call_later(first_look, self._wake.set)
        else:
            self._wake.set()
        try:
            if refused is not None:
                result = refused
            elif stmt.sent is None and session.conn.closed:
                result = StatementResult("connection_lost", message="the connection is closed; reconnect first")
            elif stmt.sent is None and "\x00" in stmt.sql:
                # libpq ends the SQL at a NUL and runs what precedes it ("DELETE FROM t\0 WHERE ...")
                result = StatementResult("error", message="not sent: the SQL contains a NUL byte (\\0), "
                                                          "where the server would see the statement end")
            else:
                result = await session.conn.execute(stmt.sql, stmt.sent)
        except asyncio.CancelledError:
            result = StatementResult("cancelled", message="cancelled while closing")
            self._finish(session, stmt, result)
            raise
        except Exception as exc:  # a driver failure we did not foresee: report, don't crash
            result = StatementResult("error", message=f"{type(exc).__name__}: {exc}")
        if stmt.result is None:  # not already taken in by _on_answer
            self._take_in(session, stmt, result)
            if result.outcome == "ok" and stmt.skip_locked:
                await self._account_skipped(session, stmt.sql, result)
            if self.nodes is not None:
                result.node = session.node
                if result.code and result.outcome != "connection_lost":
                    await self._refine(session, stmt.sql, result)
            stmt.result = result
            session.last = result
            self._answer_if_known(session, stmt)
        result = stmt.result
        if stmt.answered.is_set():  # complete without asking the server more: the listeners hear of it now
            self.emit(StatementFinished(session.name, perf_counter_ns(), stmt.stmt_id, stmt.sql, result,
                                        node=session.node))
            if stmt.told_early and session.conn.txn_state_now() != session.txn:
                await self._refresh_state(session)  # not what the server said after all
            else:
                self.emit(SessionState(session.name, perf_counter_ns(), session.txn, session.budgets, session.ident,
                                       node=session.node))
        else:
            self.emit(StatementFinished(session.name, perf_counter_ns(), stmt.stmt_id, stmt.sql, result,
                                        node=session.node))
            if self.nodes is not None and refused is None:
                await self._after(session, result)
            # The session stays busy until its state is read back: one connection,
            # one request at a time (PyMySQL connections are not thread-safe).
            await self._refresh_state(session, stmt=stmt if stmt.touches_budgets else None)
        if self.backend.engine == "mysql":
            _track_metadata(session, stmt.sql, result)
        if session.txn == "idle":
            session.wrote_in_txn = False
        elif _WRITES.match(stmt.sql) and (result.outcome == "ok" or result.result_sets):
            session.wrote_in_txn = True  # its uncommitted changes: no skipped rows for its own reads
        _answered(stmt)  # the caller has its answer; what follows is asked after it
        if result.outcome == "refused":
            await asyncio.sleep(0)  # let the caller go on first: setting up the question is not its wait
            await self._name_holders(session, stmt, result)
        elif result.outcome == "deadlock":
            await asyncio.sleep(0)
            await self._explain_deadlock(session, stmt, result)
        self._release(session, stmt)
        if result.outcome == "connection_lost" and self._lost_probe is None:
            self._lost_probe = asyncio.create_task(self._probe_server(session), name="lockrace-lost-probe")

    def _on_answer(self, session: Session, stmt_id: int, result: StatementResult, final: bool = True) -> None:
        """The driver has the answer to statement ``stmt_id``, on the
        loop (see SessionConnection.send): when nothing more is to be asked of the
        server, the caller has it from here, a turn of the loop before the
        statement's task wakes up.

        An error is told first as it arrives (``final`` False), while the server
        still ends the statement: it is taken in then.  A lock error (a refusal, a
        lock or statement timeout, a deadlock) that was the first thing the server
        said, in a session outside any transaction, reaches the caller right
        there: the server ends an implicit transaction, so the session is idle
        once it is ready again.  The statement's task checks that (``_execute``)."""
        stmt = session.running
        if stmt is None or stmt.stmt_id != stmt_id:
            return  # ended already (cancelled while closing): nobody waits for it
        self._read_text(session, stmt)
        if self.nodes is not None or (result.outcome == "ok" and stmt.skip_locked):
            return  # the task takes it in: it has more to ask
        if stmt.result is None:
            self._take_in(session, stmt, result)
            stmt.result = result
            session.last = result
        if stmt.result is not result:
            return
        if final:
            self._answer_if_known(session, stmt)
        elif result.code in _LOCK_ERROR_STATES and not result.result_sets and session.txn == "idle" \
                and session.budgets and not stmt.touches_budgets:
            _answered(stmt)
            stmt.told_early = True

    def _take_in(self, session: Session, stmt: RunningStatement, result: StatementResult) -> None:
        """What the race knows about a statement, into its result."""
        # the answer's own time, not when this coroutine got the loop back
        end = result.started_ns + result.elapsed_ns if result.started_ns else perf_counter_ns()
        if stmt.blocked_since is not None:
            stmt.waited_ns += end - stmt.blocked_since
            stmt.blocked_since = None
        result.waited_ns = stmt.waited_ns
        result.blocked_by = stmt.blockers
        result.blockers_seen = stmt.blockers_seen
        result.lock = stmt.lock
        result.locks_seen = stmt.locks_seen
        result.budget = stmt.budget
        if result.outcome == "recovery_conflict":
            # a hot standby ended it for holding up replay: that budget applied, not a lock wait's
            result.budget = next((b for b in session.budgets if b.name == STANDBY_BUDGET), result.budget)
        if result.outcome == "timed_out" and result.code == "1205" and result.budget is not None \
                and result.budget.ms == 0:
            # innodb_lock_wait_timeout = 0 (or lock_wait_timeout = 0): the server did not wait at all
            result.outcome = "refused"
        elif result.outcome == "refused" and result.code == "55P03" and result.budget is not None \
                and result.budget.ms != 0:
            # PostgreSQL's FOR UPDATE/SHARE NOWAIT: the table lock could have waited up to
            # lock_timeout, but a refusal ("could not obtain lock on row") is NOWAIT's
            result.budget = _NOWAIT
        if stmt.may_prepare:
            self._track_prepared(session, stmt.sql, result)
        if result.tag == "ROLLBACK" or stmt.lock is not None:  # a COMMIT that rolled back, NOWAIT that waited
            result.explained = explain_mod.notes(stmt.sql, result, session.flavor)

    def _answer_if_known(self, session: Session, stmt: RunningStatement) -> None:
        """The answer is complete without asking the server anything more (the driver
        knows the session's state, it did not change, the budgets cannot have): the
        listeners hear of it, and the caller has it."""
        if self.nodes is not None or not session.budgets or stmt.touches_budgets:
            return
        txn = session.conn.txn_state_now()
        if txn is not None and txn == session.txn:
            _answered(stmt)

    def _track_prepared(self, session: Session, sql: str, result: StatementResult) -> None:
        """The prepared transactions this session's statement prepared or finished, as
        the server's answer says (see core/prepared.py): only these are lockrace's to
        roll back at the end."""
        prepared, finished = prepared_mod.changes(sql, [r.tag for r in result.succeeded], self.backend.engine)
        for gid in finished:
            self.prepared.pop(gid, None)
        for gid in prepared:
            self.prepared[gid] = session.name

    async def _before(self, session: Session, sql: str) -> StatementResult | None:
        """Cluster races: the topology's preparation for a statement on this node
        (a hot standby first replays what the primary did); a note it returns is
        shown, a result it returns refuses the statement."""
        try:
            said = await asyncio.wait_for(
                self._cluster.hooks.before_statement(self._cluster, session.node, self.monitors, sql, self.name_of), 10)
        except (asyncio.TimeoutError, Exception) as exc:
            said = f"could not prepare {session.node}: {exc or type(exc).__name__}"
        if isinstance(said, StatementResult):
            return said
        if said:
            self.emit(ServerNote(session.name, perf_counter_ns(), said, node=session.node))
        return None

    async def _after(self, session: Session, result: StatementResult) -> None:
        try:
            said = await asyncio.wait_for(
                self._cluster.hooks.after_statement(self._cluster, session.node, self.monitors, result, self.name_of), 5)
        except (asyncio.TimeoutError, Exception) as exc:
            said = None
            self.emit(ServerNote(session.name, perf_counter_ns(), f"after the statement on {session.node}: {exc}",
                                 "warning", node=session.node))
        if said:
            self.emit(ServerNote(session.name, perf_counter_ns(), said, node=session.node))

    async def _refine(self, session: Session, sql: str, result: StatementResult) -> None:
        """Cluster races: let the topology tell a cluster failure from an ordinary one,
        from what the session's own node reports (e.g. Galera's wsrep counters)."""
        monitor = self.monitor_for(session)
        if monitor is None:
            return
        try:
            await asyncio.wait_for(self._cluster.hooks.refine(self._cluster, session.node, monitor, result, sql), 5)
        except (asyncio.TimeoutError, Exception) as exc:
            self.emit(ServerNote(session.name, perf_counter_ns(), f"could not ask {session.node} why: {exc}", "warning",
                                 node=session.node))

    async def _probe_server(self, first: Session) -> None:
        """One session lost its connection: is the server gone, or just that backend?

        A fresh connection answers without touching any session's connection.
        If the server cannot be reached, every other idle session is marked
        closed at once (listeners show "connection lost" everywhere), instead of
        each finding out on its next statement.
        """
        try:
            try:
                probe = await _within(self._backend_for(first.node).connect_monitor(), 5)
            except Exception:
                reachable = False
            else:
                reachable = True
                with contextlib.suppress(Exception):
                    await probe.close()
            if reachable:
                return
            where = self._backend_for(first.node).server_name + (f" on {first.node}" if first.node else "")
            self.emit(ServerNote("", perf_counter_ns(), f"lost the connection to {where}", "error", node=first.node))
            for s in list(self.sessions.values()):
                if s is not first and s.node == first.node and s.running is None and s.txn != "closed":
                    s.txn = TxnState.CLOSED
                    self.emit(SessionState(s.name, perf_counter_ns(), "closed", s.budgets, s.ident, node=s.node))
        finally:
            self._lost_probe = None

    def _stop_lost_probe(self) -> None:
        if self._lost_probe is not None:
            self._lost_probe.cancel()
            self._lost_probe = None

    def _finish(self, session: Session, stmt: RunningStatement, result: StatementResult) -> None:
        stmt.result = result
        session.last = result
        self.emit(StatementFinished(session.name, perf_counter_ns(), stmt.stmt_id, stmt.sql, result, node=session.node))
        self._release(session, stmt)

    def _release(self, session: Session, stmt: RunningStatement) -> None:
        if session.running is stmt:
            session.running = None
        _answered(stmt)
        stmt.done.set()
        stmt.blocked.set()  # wake anyone waiting for "blocked or done"

    async def _account_skipped(self, session: Session, sql_text: str, result: StatementResult) -> None:
        """How many rows the SKIP LOCKED read passed over because others lock them,
        and who holds them: the same read without its locking clause, run again on
        lockrace's own monitor connection (never the session's), in a read-only
        transaction that is rolled back, bounded in time.  Where that could change
        anything or give a wrong count, nothing is run and the result says why the
        count is unknown (``skip_unknown``): a read that calls a function, one whose
        limit the probe cannot repeat, a session whose own transaction changed rows
        (PostgreSQL: those changes are seen only from the session's connection).
        MariaDB/MySQL: read as committed and at READ UNCOMMITTED (rows others are
        still inserting are seen there, and InnoDB's SKIP LOCKED passes them over)."""
        monitor = self.monitor_for(session)
        if monitor is None:
            return
        try:
            sql, limit, table = skip_probe(sql_text, "postgres" if self.backend.engine == "postgres" else "mysql")
            if result.truncated:
                raise NoProbe("the result is too large to compare row by row")
            if self.backend.engine == "postgres" and session.wrote_in_txn:
                raise NoProbe("this transaction changed rows itself, which only its own connection sees")
        except NoProbe as why:
            result.skip_unknown = str(why)
            return
        bound = (limit or 0) + SKIP_PROBE_ROWS  # the probe reads a bounded number of rows too
        try:
            # bounded here too: the monitor's own limits need a server that answers
            probe_sql = f"{sql} LIMIT {bound}"
            if self.backend.engine == "postgres":
                seen, latest, own = await _within(monitor.plain_read(probe_sql), CANCEL_S), None, 0
            else:
                seen, latest = await _within(monitor.skip_reads(probe_sql), CANCEL_S)
                own = int(session.wrote_in_txn)
            if seen is None:
                result.skip_unknown = "the server did not answer the count's read"
                return
            for rows in (seen, latest or []):
                if len(rows) >= bound and (limit is None or not result.rows or result.rows[-1] not in rows):
                    # the probe stopped short of what the read passed: no count rather than a wrong one
                    result.skip_unknown = f"more than {bound} rows to compare"
                    return
            result.skipped_rows = count_passed_over(seen, result.rows, limit, latest, own)
            if result.skipped_rows and table:
                holders = await _within(monitor.row_lock_holders(table, session.ident), CANCEL_S)
                result.skipped_from = tuple(sorted(self.holder_name(i, session.node) for i in holders.holders))
        except asyncio.TimeoutError:
            result.skip_unknown = "the server did not answer the count's read in time"
            self.emit(ServerNote(session.name, perf_counter_ns(), "could not count skipped rows: the server did not answer",
                                 "warning", node=session.node))
            return
        except Exception as exc:
            result.skip_unknown = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            self.emit(ServerNote(session.name, perf_counter_ns(), f"could not count skipped rows: {exc}", "warning",
                                 node=session.node))
            return
        result.outcome = with_skip(result.outcome, sql_text, result.skipped_rows)

    def holder_name(self, ident: int, node: str = "") -> str:
        """A lock holder by name: a session of this race, or another client (foreign)."""
        name = self.name_of(ident, node)
        if name in self.sessions:
            return name
        if self.nodes is not None and not re.match(r"(pid|thread) \d+", name):
            return name  # a cluster's own process (replay, a node's applier)
        return f"another client ({name})"

    async def _name_holders(self, session: Session, stmt: RunningStatement, result: StatementResult) -> None:
        """A refusal names no holder: who holds locks on the table it wanted, as the
        server's lock views tell right after the answer."""
        monitor = self.monitor_for(session)
        idents = None  # the views could not say: held_by stays None
        try:
            if monitor is not None:
                idents = await _within(monitor.refusal_holders(stmt.sql, result.message, session.ident), 2)
        except Exception:
            pass
        if idents is not None:
            result.held_by = tuple(sorted(self.holder_name(i, session.node) for i in idents))
        # said whatever was found: a listener waiting to name the holder goes on
        self.emit(StatementExplained(session.name, perf_counter_ns(), stmt.stmt_id, result, node=session.node))

    async def _explain_deadlock(self, session: Session, stmt: RunningStatement, result: StatementResult) -> None:
        """A deadlock victim: the server's account of the cycle, sessions by name (engine/explain.py)."""
        await explain_mod.deadlock(self, session, result)
        self.emit(StatementExplained(session.name, perf_counter_ns(), stmt.stmt_id, result, node=session.node))

    async def _refresh_state(self, session: Session, stmt: RunningStatement | None = None) -> None:
        """The session's transaction state (the driver's, from the protocol) and its
        budgets.  The budgets are read from the server once, on a connection that
        has not run anything yet; after that they follow what the session runs
        (``BudgetBook``): nothing of lockrace's runs on a session's connection."""
        try:
            txn = await session.conn.txn_state()
            if session.book is None:
                backend = self._backend_for(session.node)
                session.book = BudgetBook(session.flavor, await session.conn.budgets(),
                                          getattr(backend, "budget_defaults", None))
            elif stmt is not None and stmt.result is not None:
                result = stmt.result
                failed = bool(result.code) or result.outcome in ("cancelled", "connection_lost", "error")
                session.book.follow(stmt.sql, [r.tag for r in result.succeeded], failed, txn)
            session.budgets = session.book.budgets()
        except Exception:
            txn = TxnState.CLOSED if session.conn.closed else session.txn
        session.txn = txn
        self.emit(SessionState(session.name, perf_counter_ns(), txn, session.budgets, session.ident, node=session.node))

    async def cancel(self, name: str) -> bool:
        """Ask the server to cancel the statement running in session ``name``."""
        session = self.sessions[name]
        monitor = self.monitor_for(session)
        if session.running is None or monitor is None:
            return False
        if monitor.closed:
            await self._replace_monitor(session.node)
            monitor = self.monitor_for(session)
            if monitor is None:
                return False
        try:
            done = await _within(monitor.cancel(session.ident), CANCEL_S)
        except asyncio.TimeoutError:
            return False  # the server does not answer
        except Exception:
            if not await self._replace_monitor(session.node):
                raise
            return await self._cancel_anew(session)
        if not done and monitor.closed and await self._replace_monitor(session.node):
            # the server had ended the monitor's connection (found out only now: an idle
            # MariaDB monitor does not look at the lock views on a timer): once more, anew
            return await self._cancel_anew(session)
        return done

    async def _cancel_anew(self, session: Session) -> bool:
        """``cancel`` once more, on the monitor that replaced a closed one."""
        monitor = self.monitor_for(session)
        if monitor is None:
            return False
        return await _within(monitor.cancel(session.ident), CANCEL_S)

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
    def name_of(self, ident: int, node: str = "") -> str:
        """The session with backend ``ident`` on ``node`` (idents are per server)."""
        for s in self.sessions.values():
            if s.ident == ident and s.node == node:
                return s.name
        if self.nodes is not None:
            named = self._cluster.hooks.blocker_name(node, ident)
            if named:
                return named
        what = f"pid {ident}" if self.backend.engine == "postgres" else f"thread {ident}"
        return f"{what} on {node}" if node else what

    def _metadata_holders(self, waiter: Session, lock, per_node_monitor=None) -> tuple[str, ...]:
        """A metadata-lock wait whose holder the server's views did not name: the sessions
        of this race that hold it as far as their own statements tell (FLUSH TABLES WITH
        READ LOCK, LOCK TABLES, an open transaction that touched the table); else say
        plainly that the server does not tell."""
        state = (lock.detail or "").lower()
        others = [x for x in self.sessions.values() if x is not waiter and x.node == waiter.node]
        if "global read" in state or "backup" in state:
            found = [x.name for x in others if x.global_read_lock]
        else:
            table = (lock.relation or "").lower()
            # a session of the race already waiting for an exclusive lock on the table (an
            # ALTER behind an open transaction) is what this one queues behind, as the
            # plugin's view names it; else the sessions that hold the table
            mine = waiter.running
            found = [x.name for x in others
                     if table and mine is not None and x.running is not None and x.running.blocked_since is not None
                     and x.running.lock is not None and x.running.lock.kind == "metadata"
                     and (x.running.lock.relation or "").lower() == table
                     and x.running.started_ns < mine.started_ns and _EXCLUSIVE_MDL.match(x.running.sql)]
            found = found or [x.name for x in others if table and (table in x.locked_tables or table in x.tables_in_txn)]
        if found:
            return tuple(found)
        if per_node_monitor is not None and getattr(per_node_monitor, "has_mdl_info", True) is False:
            return (NO_MDL_INFO,)
        return ()

    async def _node_waits(self, node: str, sessions: list[Session]):
        monitor = self.monitors.get(node, self.monitor)
        if monitor is None:
            return {}
        idents = [s.ident for s in sessions]
        reports = await monitor.waits(idents)
        if self.nodes is not None:
            reports = await self._cluster.hooks.waits(self._cluster, node, monitor, idents, reports)
        return reports

    async def poll_waits(self) -> None:
        """Ask the server (every node of a cluster) now who waits on whom, and emit what changed."""
        running = [s for s in self.sessions.values() if s.running is not None]
        if not running or self.monitor is None:
            return
        asked = {s.name: s.running for s in running}
        by_node: dict[str, list[Session]] = {}
        for s in running:
            by_node.setdefault(s.node, []).append(s)
        if len(by_node) == 1:
            node, group = next(iter(by_node.items()))
            per_node = {node: await self._node_waits(node, group)}
        else:
            answers = await asyncio.gather(*(self._node_waits(n, g) for n, g in by_node.items()))
            per_node = dict(zip(by_node, answers))
        now = perf_counter_ns()
        for s in running:
            stmt = s.running
            if stmt is None or stmt.result is not None or stmt is not asked[s.name]:
                continue  # finished while we asked: the answer is about that statement, not a newer one
            report = per_node[s.node].get(s.ident)
            # an answer read before this statement began says nothing about it (MariaDB's
            # InnoDB views, answered from the last read within 100 ms)
            taken = report.taken_ns if report is not None else \
                getattr(self.monitors.get(s.node, self.monitor), "snapshot_ns", None)
            if taken is not None and stmt.started_ns > taken:
                continue
            if report is not None:
                # a blocker that is a server process (the startup process on a hot standby) by its name
                blockers = tuple(report.process_names.get(i) or self.holder_name(i, s.node) for i in report.blockers)
                if not blockers and report.lock is not None and report.lock.kind == "metadata" \
                        and self.backend.engine == "mysql":
                    blockers = self._metadata_holders(s, report.lock, per_node_monitor=self.monitors.get(s.node,
                                                                                                        self.monitor))
                if report.budget is not None:
                    stmt.budget = report.budget
                elif report.lock is not None and report.lock.kind == "metadata" and self.backend.engine == "mysql":
                    # a metadata-lock wait is bounded by lock_wait_timeout, whatever the statement
                    stmt.budget = s.budget_for(stmt.sql, metadata=True)
                shown = report.lock.describe() if report.lock else None  # a report says news only if its words change
                if stmt.blocked_since is None or (blockers and blockers != stmt.blockers) or (
                        shown is not None and shown != (stmt.lock.describe() if stmt.lock else None)):
                    if stmt.blocked_since is None:
                        stmt.blocked_since = now
                        if report.waiting_s is not None:
                            # the server says when the wait began (PostgreSQL 14+)
                            stmt.blocked_since = max(stmt.started_ns, now - int(report.waiting_s * 1e9))
                    stmt.blockers = blockers or stmt.blockers
                    stmt.blockers_seen += tuple(b for b in blockers if b not in stmt.blockers_seen)
                    stmt.lock = report.lock or stmt.lock
                    if report.lock is not None and report.lock not in stmt.locks_seen:
                        stmt.locks_seen += (report.lock,)
                    stmt.ever_blocked = True
                    self.emit(StatementBlocked(s.name, now, stmt.stmt_id, stmt.blockers, stmt.lock, stmt.started_ns,
                                               budget=stmt.budget, node=s.node))
                    stmt.blocked.set()
            elif stmt.blocked_since is not None and stmt.result is None:
                stmt.waited_ns += now - stmt.blocked_since
                stmt.blocked_since = None
                stmt.blocked.clear()
                self.emit(StatementUnblocked(s.name, now, stmt.stmt_id, node=s.node))

    async def _watch(self) -> None:
        failures = 0
        while True:
            self._wake.clear()  # a submit from here on wakes the next wait at once
            running = [s for s in self.sessions.values() if s.running is not None]
            if not running:
                await self._wake.wait()
                continue
            first = [s for s in running if s.running is not None and not s.running.polled]
            if first:
                # a statement just sent: look once it has reached the server (monitor.first_poll_s)
                due = max(stmt.started_ns + int(self._first_poll_s(s) * 1e9)
                          for s in first if (stmt := s.running) is not None)
                wait_s = (due - perf_counter_ns()) / 1e9
                if wait_s > 0:
                    await asyncio.sleep(wait_s)
                    continue
                for s in first:
                    if s.running is not None:
                        s.running.polled = True
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
                if await self._replace_monitor():
                    failures = 0
                    continue
                await asyncio.sleep(min(0.5, 0.02 * failures))
                continue
            all_blocked = all(s.running is not None and s.running.blocked_since is not None for s in running)
            if all_blocked:
                # Nothing new to learn quickly: a finish arrives as the statement's
                # own answer, and a new statement wakes this wait at once.
                timeout: float | None = POLL_BLOCKED_S
                if self.nodes is None and self.monitor is not None:
                    timeout = self.monitor.blocked_poll_s(POLL_BLOCKED_S)  # MariaDB: see backends/mysql.py
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout)
            else:
                await asyncio.sleep(POLL_S)

    def _first_poll_s(self, session: Session) -> float:
        monitor = self.monitor_for(session)
        return getattr(monitor, "first_poll_s", 0.0) if monitor is not None else 0.0

    async def _replace_monitor(self, node: str | None = None) -> bool:
        """A monitor's connection was ended (pg_terminate_backend, KILL,
        idle_session_timeout, a pooler): open a new one so that blocked-detection
        and cancelling go on.  ``node`` None: every closed monitor.  False when
        none was replaced (none closed, or the server cannot be reached)."""
        nodes = [node] if node is not None else list(self.monitors) or [""]
        replaced = False
        for name in nodes:
            old = self.monitors.get(name, self.monitor)
            if old is not None and not old.closed:
                continue
            try:
                fresh = await _within(self._backend_for(name).connect_monitor(), 5)
                if self.nodes is not None:
                    await _within(self._cluster.hooks.node_opened(self._cluster, name, fresh), 5)
            except (asyncio.TimeoutError, Exception):
                continue
            self.monitors[name] = fresh
            if old is self.monitor or self.monitor is None:
                self.monitor = fresh
            if old is not None:
                with contextlib.suppress(Exception):
                    await _within(old.close(), 1)
            replaced = True
            where = f" ({name})" if name else ""
            self.emit(ServerNote("", perf_counter_ns(), f"monitor connection{where} was closed by the server; reconnected",
                                 "warning"))
        if replaced:
            self.monitor_error = ""
        return replaced

    async def wait_blocked_or_done(self, stmt: RunningStatement, timeout: float) -> bool:
        """True once the server reports ``stmt`` blocked or it finished."""
        try:
            await asyncio.wait_for(stmt.blocked.wait(), timeout)
            return True
        except asyncio.TimeoutError:
            return False


async def _within(aw, timeout: float):
    """``aw``'s result within ``timeout`` s, or TimeoutError -- without waiting for
    it to react to being cancelled (a driver call in a worker thread on a server
    that does not answer would not), unlike asyncio.wait_for."""
    task = asyncio.ensure_future(aw)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
    except asyncio.CancelledError:
        task.cancel()
        task.add_done_callback(_consume)
        raise
    if not done:
        task.cancel()
        task.add_done_callback(_consume)
        raise asyncio.TimeoutError
    return task.result()


_FTWRL = re.compile(r"^\s*FLUSH\s+TABLES?\s+WITH\s+READ\s+LOCK\b", re.IGNORECASE)
_UNLOCK_TABLES = re.compile(r"^\s*UNLOCK\s+TABLES?\b", re.IGNORECASE)
_LOCK_TABLES = re.compile(r"^\s*LOCK\s+TABLES?\s+(.*)$", re.IGNORECASE | re.DOTALL)
_NAMED_TABLES = re.compile(r"\b(?:FROM|UPDATE|INTO|TABLE|JOIN)\s+(?:`?\w+`?\.)?`?([A-Za-z_][\w$]*)`?", re.IGNORECASE)


def _track_metadata(session: Session, sql: str, result: StatementResult) -> None:
    """MariaDB/MySQL: which metadata locks a session holds, as its own statements tell
    (for naming holders when the server's views do not: no METADATA_LOCK_INFO)."""
    ok = result.outcome in ("ok", "skipped")
    if ok and _FTWRL.match(sql):
        session.global_read_lock = True
    elif ok and _UNLOCK_TABLES.match(sql):
        session.global_read_lock = False
        session.locked_tables = set()
    elif ok and (m := _LOCK_TABLES.match(sql)):
        session.locked_tables = {part.strip().split()[0].strip("`").split(".")[-1].strip("`").lower()
                                 for part in m.group(1).rstrip("; ").split(",") if part.strip()}
    if session.txn == "idle":
        session.tables_in_txn = set()
    elif result.outcome in ("ok", "skipped") or result.lock is None or result.lock.kind != "metadata":
        # a statement that ran inside a transaction keeps its tables' metadata locks until it ends
        session.tables_in_txn |= {t.lower() for t in _NAMED_TABLES.findall(sql)}


def _answered(stmt: RunningStatement) -> None:
    """The statement's answer is in (``stmt.result``): whoever waits for it goes on."""
    stmt.answered.set()
    waiter = stmt.waiter
    if waiter is not None and not waiter.done():
        waiter.set_result(None)


def _consume(task: asyncio.Future) -> None:
    if not task.cancelled():
        task.exception()


async def _bounded(aw, timeout: float) -> None:
    """Await ``aw`` for at most ``timeout`` s, swallowing its errors (cleanup)."""
    with contextlib.suppress(asyncio.TimeoutError, Exception):
        await _within(aw, timeout)
