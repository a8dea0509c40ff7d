"""A statement's life in a race, as one state machine.

::

    QUEUED ──► SENT ◄──► BLOCKED
      │         │          │
      └────────►┴──► ANSWER_IN ──► ANSWERED ──► FINISHED
                                 (any state ──► FINISHED: cancelled while closing)

* QUEUED: submitted; not on its way yet (it waits for the session's previous
  statement, or the driver sends it when its task runs).
* SENT: the server has it (or is about to: ``execute`` sends it).
* BLOCKED: the server says it waits for a lock (back to SENT when it stops).
* ANSWER_IN: the server's answer is taken in (``result``), the caller does
  not have it yet: something is still to be asked (the session's state, its
  budgets, skipped rows, a cluster node's account).
* ANSWERED: the caller has the answer (``Race.run`` returns); what is asked
  after it (a refusal's holders, a deadlock's cycle) may still be on its way.
* FINISHED: the session is free for its next statement.

The answer reaches the engine one way: ``Statements.answer``.  A driver that
reads the answer on the loop tells it there (``SessionConnection.send``'s
``on_answer``: the fast path, a turn of the loop before the statement's task
wakes up); one that reads it on its thread, or a statement that was never sent
(a closed connection, a cluster node's refusal), has the task tell it with what
``execute`` returned.  Each transition is checked (``RunningStatement.to``).
"""

from __future__ import annotations

import asyncio
import enum
import re
from dataclasses import dataclass, field
from functools import partial
from time import perf_counter_ns
from typing import TYPE_CHECKING, Callable

from ..core.events import (
    STANDBY_BUDGET,
    Budget,
    LockInfo,
    SessionState,
    StatementFinished,
    StatementResult,
    StatementStarted,
)
from ..core.outcome import asks_skip_locked
from ..core.states import TxnState
from . import explain as explain_mod
from .budget_book import BudgetBook

if TYPE_CHECKING:
    from .race import Race
    from .session import Session


class State(enum.Enum):
    QUEUED = "queued"
    SENT = "sent"
    BLOCKED = "blocked"
    ANSWER_IN = "answer in"
    ANSWERED = "answered"
    FINISHED = "finished"


_ALLOWED: dict[State, frozenset[State]] = {
    State.QUEUED: frozenset({State.SENT, State.ANSWER_IN, State.FINISHED}),
    State.SENT: frozenset({State.BLOCKED, State.ANSWER_IN, State.FINISHED}),
    State.BLOCKED: frozenset({State.SENT, State.ANSWER_IN, State.FINISHED}),
    State.ANSWER_IN: frozenset({State.ANSWERED, State.FINISHED}),
    State.ANSWERED: frozenset({State.FINISHED}),
    State.FINISHED: frozenset(),
}
_WAITING = frozenset({State.SENT, State.BLOCKED})  # what the server's lock views speak of
_NOT_IN = frozenset({State.QUEUED, State.SENT, State.BLOCKED})  # no answer taken in yet


class BadTransition(RuntimeError):
    pass


@dataclass(slots=True)
class RunningStatement:
    stmt_id: int
    sql: str
    started_ns: int
    budget: Budget | None
    state: State = State.QUEUED
    task: asyncio.Task | None = None
    launch: asyncio.TimerHandle | None = None  # the task's start, due once the server has had the CPU
    announced: bool = False  # StatementStarted is out (emitted as it was sent)
    text_read: bool = False  # touches_budgets and may_prepare are set
    told_early: bool = False  # answered at the error, before the server was ready again (see Statements.answer)
    blocked_since: int | None = None
    waited_ns: int = 0
    blockers: tuple[str, ...] = ()
    blockers_seen: tuple[str, ...] = ()  # the union over the statement, in the order first reported
    lock: LockInfo | None = None
    locks_seen: tuple[LockInfo, ...] = ()
    ever_blocked: bool = False
    sent: asyncio.Future | None = None  # what the connection's send() returned: the statement is on its way
    polled: bool = False  # the monitor has looked at the server's lock views for it
    touches_budgets: bool = False  # SET, COMMIT, ...: the session's budgets are read again after it
    may_prepare: bool = False  # PREPARE TRANSACTION / XA: the race keeps track of prepared transactions
    skip_read: bool | None = None  # SKIP LOCKED (see ``skip_locked``), once worked out
    answered: asyncio.Event = field(default_factory=asyncio.Event)  # the server's answer is in: ``result``
    waiter: asyncio.Future | None = None  # Race.run's own wait for the answer
    on_sent: Callable[[asyncio.Future], None] | None = None  # starts the task if the answer beats its timer
    done: asyncio.Event = field(default_factory=asyncio.Event)  # and what was asked after it: the session is free
    blocked: asyncio.Event = field(default_factory=asyncio.Event)  # the server reports it blocked (or it is done)
    result: StatementResult | None = None

    @property
    def skip_locked(self) -> bool:
        """SKIP LOCKED: the rows it passed over are counted after it.  Worked out
        only when an ok answer asks for it (a refusal or a timeout never does)."""
        if self.skip_read is None:
            self.skip_read = asks_skip_locked(self.sql)
        return self.skip_read

    def to(self, state: State) -> None:
        """Move to ``state``; a move the life above does not allow is a bug, said at once."""
        if state not in _ALLOWED[self.state]:
            raise BadTransition(f"statement {self.stmt_id}: {self.state.value} -> {state.value}")
        self.state = state

    @property
    def waiting(self) -> bool:
        """On the server without an answer yet: what its lock views may speak of."""
        return self.state in _WAITING

    @property
    def answer_in(self) -> bool:
        return self.state not in _NOT_IN


class SessionBusy(Exception):
    pass


# Statements after which the session's wait budgets may differ (its BudgetBook follows them).
# (The lookahead on the first letter lets the search pass over most words at once.)
_BUDGET_TOUCHING = re.compile(r"\b(?=[SRCAEBDPsrcaebdp])(SET|RESET|COMMIT|ROLLBACK|ABORT|END|BEGIN|START|DISCARD|SET_CONFIG|SAVEPOINT"
                              r"|RELEASE|PREPARE)\b", re.IGNORECASE)
_WRITES = re.compile(r"^\s*(INSERT|UPDATE|DELETE|REPLACE|WITH)\b", re.IGNORECASE)
# A statement's task starts once the loop has slept after the send (epoll's resolution: 1 ms),
# or at once when the answer comes first.  On a small machine the server's backend is woken on
# lockrace's own CPU (a socket write is a "sync" wake-up: the kernel expects the writer to sleep
# next), so whatever lockrace does before it sleeps delays the server's answer by as much.
_LAUNCH_AFTER_S = 0.001


class Statements:
    """Runs a race's statements through their life (see the module's text)."""

    def __init__(self, race: Race):
        self.race = race
        self._next_id = 0

    # ------------------------------------------------------------ QUEUED -> SENT
    def submit(self, name: str, sql: str) -> RunningStatement:
        """Start ``sql`` in session ``name``; returns at once.  A session whose last
        statement has its answer but is still being asked about (a refusal's holder)
        takes the new one right after that."""
        race = self.race
        session = race.sessions[name]
        previous = session.running
        if previous is not None and not previous.answered.is_set():
            raise SessionBusy(f"session {name} is still running a statement")
        self._next_id += 1
        stmt_id, started_ns = self._next_id, perf_counter_ns()
        announced = previous is None and race.topology.announces and "\x00" not in sql
        heard = announced and race.has_listeners  # listeners hear of it with its budget, before the send
        budget = session.budget_for(sql) if heard else None
        sent = None
        if announced:
            # Before the send, only what must precede it: the listeners hear of the
            # statement first, in the order statements are started (their work is done
            # before the server gets it, not while it needs the CPU: see
            # _LAUNCH_AFTER_S).  Then it is on its way to the server before anything
            # else happens (a cluster's node may first have to prepare: see topology.py);
            # the answer comes on a later turn of the loop.
            if heard:
                race.emit(StatementStarted(session.name, started_ns, stmt_id, sql, budget, node=session.node))
            sent = session.conn.send(sql, partial(self.told, session, stmt_id))  # None: closed, busy
        stmt = RunningStatement(stmt_id, sql, started_ns, budget if heard else session.budget_for(sql))
        stmt.announced, stmt.sent = announced, sent
        session.running = stmt
        if stmt.sent is not None:
            stmt.state = State.SENT
            # the task starts once the loop has slept, or as the answer is in (read on the
            # loop or on the session's thread), whichever is first: after the caller's turn
            stmt.launch = asyncio.get_running_loop().call_later(_LAUNCH_AFTER_S, self.launch, session, stmt, previous)
            stmt.on_sent = lambda _: self.launch(session, stmt, previous)
            stmt.sent.add_done_callback(stmt.on_sent)
        else:
            self.launch(session, stmt, previous)
        return stmt

    def launch(self, session: Session, stmt: RunningStatement, previous: RunningStatement | None = None) -> None:
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
        _read_text(stmt)
        stmt.task = asyncio.create_task(self._execute(session, stmt, previous),
                                        name=f"lockrace-{session.name}-{stmt.stmt_id}")

    async def run(self, name: str, sql: str) -> StatementResult:
        stmt = self.submit(name, sql)
        if not stmt.answered.is_set():
            # a future of its own, not the Event's wait: the answer reaches the caller
            # with a few lines of Python less (see _answered)
            stmt.waiter = asyncio.get_running_loop().create_future()
            await stmt.waiter
        assert stmt.result is not None
        return stmt.result

    # ------------------------------------------------------------ the task
    async def _execute(self, session: Session, stmt: RunningStatement, previous: RunningStatement | None = None) -> None:
        race = self.race
        topology = race.topology
        if previous is not None:
            try:
                await previous.done.wait()  # one connection, one request at a time
            except asyncio.CancelledError:
                self.finish(session, stmt, StatementResult("cancelled", message="cancelled while closing"))
                raise
            stmt.started_ns = perf_counter_ns()
        refused = await topology.before(session, stmt.sql)
        if not stmt.announced:
            race.emit(StatementStarted(session.name, stmt.started_ns, stmt.stmt_id, stmt.sql, stmt.budget,
                                       node=session.node))
        race.watcher.statement_started(session)
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
                if stmt.state is State.QUEUED:
                    stmt.to(State.SENT)  # execute sends it
                result = await session.conn.execute(stmt.sql, stmt.sent)
        except asyncio.CancelledError:
            self.finish(session, stmt, StatementResult("cancelled", message="cancelled while closing"))
            raise
        except Exception as exc:  # a driver failure we did not foresee: report, don't crash
            result = StatementResult("error", message=f"{type(exc).__name__}: {exc}")
        if not stmt.answer_in:
            self.answer(session, stmt, result, True)  # the driver did not tell it (read on its thread, or not sent)
        assert stmt.result is not None  # in, one way or the other
        result = stmt.result
        if stmt.state is State.ANSWER_IN and _more_to_ask(topology, stmt, result):
            if result.outcome == "ok" and stmt.skip_locked:
                await race.skipped.count(session, stmt.sql, result)
            await topology.after_answer(session, stmt.sql, result)
            self._answer_if_known(session, stmt)
        if stmt.state is State.ANSWERED:  # complete without asking the server more: the listeners hear of it now
            race.emit(StatementFinished(session.name, perf_counter_ns(), stmt.stmt_id, stmt.sql, result,
                                        node=session.node))
            if stmt.told_early and session.conn.txn_state_now() != session.txn:
                await self.refresh_state(session)  # not what the server said after all
            else:
                race.emit(SessionState(session.name, perf_counter_ns(), session.txn, session.budgets, session.ident,
                                       node=session.node))
        else:
            race.emit(StatementFinished(session.name, perf_counter_ns(), stmt.stmt_id, stmt.sql, result,
                                        node=session.node))
            if refused is None:
                await topology.after(session, result)
            # The session stays busy until its state is read back: one connection,
            # one request at a time (PyMySQL connections are not thread-safe).
            await self.refresh_state(session, stmt=stmt if stmt.touches_budgets else None)
        if session.dialect.tracks_metadata_locks:
            _track_metadata(session, stmt.sql, result)
        if session.txn == "idle":
            session.wrote_in_txn = False
        elif _WRITES.match(stmt.sql) and (result.outcome == "ok" or result.result_sets):
            session.wrote_in_txn = True  # its uncommitted changes: no skipped rows for its own reads
        _answered(stmt)  # the caller has its answer; what follows is asked after it
        if result.outcome == "refused":
            await asyncio.sleep(0)  # let the caller go on first: setting up the question is not its wait
            await race.holders.name_refusal_holders(session, stmt, result)
        elif result.outcome == "deadlock":
            await asyncio.sleep(0)
            await race.holders.explain_deadlock(session, stmt, result)
        self.release(session, stmt)
        if result.outcome == "connection_lost":
            race.watcher.probe_lost_server(session)

    # ------------------------------------------------------------ -> ANSWER_IN -> ANSWERED
    def told(self, session: Session, stmt_id: int, result: StatementResult, final: bool = True) -> None:
        """The driver's ``on_answer`` (see SessionConnection.send): the answer to
        statement ``stmt_id``, on the loop, before the statement's task wakes up."""
        stmt = session.running
        if stmt is None or stmt.stmt_id != stmt_id:
            return  # ended already (cancelled while closing): nobody waits for it
        self.answer(session, stmt, result, final)

    def answer(self, session: Session, stmt: RunningStatement, result: StatementResult, final: bool) -> None:
        """The one way an answer comes in.  When nothing more is to be asked of the
        server, the caller has it from here.

        An error is told first as it arrives (``final`` False), while the server
        still ends the statement: it is taken in then.  A lock error (a refusal, a
        lock or statement timeout, a deadlock) that was the first thing the server
        said, in a session outside any transaction, reaches the caller right
        there: the server ends an implicit transaction, so the session is idle
        once it is ready again.  The statement's task checks that (``_execute``)."""
        _read_text(stmt)
        if not stmt.answer_in:
            self._take_in(session, stmt, result)
            stmt.result = result
            session.last = result
            stmt.to(State.ANSWER_IN)
        elif stmt.result is not result or stmt.state is not State.ANSWER_IN:
            return  # the rest of an answer told already
        if _more_to_ask(self.race.topology, stmt, result):
            return  # the task asks it, then answers
        if final:
            self._answer_if_known(session, stmt)
        elif result.code in session.dialect.lock_error_codes and not result.result_sets and session.txn == "idle" \
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
        # what only the budget in force tells: a lock timeout at 0 is a refusal (MariaDB/MySQL),
        # a refused row NOWAIT is NOWAIT's, not its table lock's lock_timeout (PostgreSQL)
        result.outcome, result.budget = session.dialect.settle(result.outcome, result.code, result.budget)
        if stmt.may_prepare:
            self._track_prepared(session, stmt.sql, result)
        if result.tag == "ROLLBACK" or stmt.lock is not None:  # a COMMIT that rolled back, NOWAIT that waited
            result.explained = explain_mod.notes(stmt.sql, result, session.flavor)

    def _answer_if_known(self, session: Session, stmt: RunningStatement) -> None:
        """The answer is complete without asking the server anything more (the driver
        knows the session's state, it did not change, the budgets cannot have): the
        listeners hear of it, and the caller has it."""
        if not self.race.topology.answers_early or not session.budgets or stmt.touches_budgets:
            return
        txn = session.conn.txn_state_now()
        if txn is not None and txn == session.txn:
            _answered(stmt)

    def _track_prepared(self, session: Session, sql: str, result: StatementResult) -> None:
        """The prepared transactions this session's statement prepared or finished, as
        the server's answer says (see core/prepared.py): only these are lockrace's to
        roll back at the end."""
        prepared = self.race.prepared
        started, finished = session.dialect.prepared_changes(sql, [r.tag for r in result.succeeded])
        for gid in finished:
            prepared.pop(gid, None)
        for gid in started:
            prepared[gid] = session.name

    # ------------------------------------------------------------ -> FINISHED
    def finish(self, session: Session, stmt: RunningStatement, result: StatementResult) -> None:
        stmt.result = result
        session.last = result
        self.race.emit(StatementFinished(session.name, perf_counter_ns(), stmt.stmt_id, stmt.sql, result,
                                         node=session.node))
        self.release(session, stmt)

    def release(self, session: Session, stmt: RunningStatement) -> None:
        if session.running is stmt:
            session.running = None
        _answered(stmt)
        if stmt.state is not State.FINISHED:
            stmt.to(State.FINISHED)
        stmt.done.set()
        stmt.blocked.set()  # wake anyone waiting for "blocked or done"

    # ------------------------------------------------------------ the session's state
    async def refresh_state(self, session: Session, stmt: RunningStatement | None = None) -> None:
        """The session's transaction state (the driver's, from the protocol) and its
        budgets.  The budgets are read from the server once, on a connection that
        has not run anything yet; after that they follow what the session runs
        (``BudgetBook``): nothing of lockrace's runs on a session's connection."""
        try:
            txn = await session.conn.txn_state()
            if session.book is None:
                backend = self.race.topology.backend_for(session.node)
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
        self.race.emit(SessionState(session.name, perf_counter_ns(), txn, session.budgets, session.ident,
                                    node=session.node))


def _more_to_ask(topology, stmt: RunningStatement, result: StatementResult) -> bool:
    """Whether the answer needs more from the server before the caller has it
    (skipped rows to count, a cluster node's account)."""
    return not topology.answers_early or (result.outcome == "ok" and stmt.skip_locked)


def _read_text(stmt: RunningStatement) -> None:
    """What taking the answer in needs to know of the statement's text."""
    if stmt.text_read:
        return
    stmt.text_read = True
    sql = stmt.sql
    stmt.touches_budgets = bool(_BUDGET_TOUCHING.search(sql))
    upper = sql.upper()
    stmt.may_prepare = "PREPARE" in upper or "XA" in upper


def _answered(stmt: RunningStatement) -> None:
    """The statement's answer is in (``stmt.result``): whoever waits for it goes on."""
    if stmt.state is State.ANSWER_IN:
        stmt.to(State.ANSWERED)
    stmt.answered.set()
    waiter = stmt.waiter
    if waiter is not None and not waiter.done():
        waiter.set_result(None)


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
