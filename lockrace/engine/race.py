"""A race: named sessions on one server plus the monitor that watches them.

The Race is what the app, the CLI and the tests drive.  It runs statements,
asks the server (never the clock) who is blocked by whom, cancels, rolls
back, reconnects and cleans up, and tells its listeners everything as events.

Its parts, one module each:

* statement.py -- a statement's life (queued, sent, blocked, answer in,
  answered, finished) and the one way its answer comes in;
* watcher.py -- the monitor connections, the loop that asks who waits on
  whom, a monitor's replacement, the probe of a server that may be gone;
* topology.py -- one server or a cluster's nodes: where each session sits
  (``placement``), what a node does before and after a statement;
* holders.py -- sessions and lock holders by name; skipped.py -- the rows a
  SKIP LOCKED read passed over; cleanup.py -- closing, bounded in time.

On a cluster (a ``ClusterBackend``: one backend per node) each session sits
on a node, each node gets its own monitor connection, and waits, cancels,
skipped rows and session idents are all asked of and mapped on the session's
own node; events carry the node.  On a single server there is one monitor
under the node name "".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from time import perf_counter_ns
from typing import TYPE_CHECKING, Callable, Iterable

from ..backends.base import Backend, ConnectError, MonitorConnection
from ..core.events import Event, ServerNote, StatementResult
from ..core.states import TxnState
from . import cleanup
from .cleanup import within
from .holders import Holders
from .session import Session
from .skipped import CANCEL_S, SkipCounter
from .statement import RunningStatement, SessionBusy, Statements
from .topology import topology_for
from .watcher import Watcher

if TYPE_CHECKING:
    from ..backends.cluster import ClusterBackend

__all__ = ["Race", "SessionBusy", "Listener"]

Listener = Callable[[Event], None]

_TOO_MANY = re.compile(r"too many|connection slots are reserved|max_user_connections|connection limit", re.IGNORECASE)

log = logging.getLogger("lockrace.engine")


class Race:
    def __init__(self, backend: Backend, names: Iterable[str] = ("A", "B", "C", "D"),
                 placement: dict[str, str] | None = None):
        self.backend = backend
        self.names = list(names)
        self.sessions: dict[str, Session] = {}
        self.monitor: MonitorConnection | None = None
        """The (first node's) monitor; on a cluster every node's is in ``monitors``."""
        self.placement: dict[str, str] = dict(placement or {})
        self.monitors: dict[str, MonitorConnection] = {}
        self.monitor_error: str = ""
        self.prepared: dict[str, str] = {}  # prepared transaction (gid / xid as written) -> session that prepared it
        self.listener_failures: list[str] = []  # what listeners raised (each also said in a note and logged)
        self._listeners: list[Listener] = []
        self._reporting = False
        self.topology = topology_for(self)
        self.statements = Statements(self)
        self.watcher = Watcher(self)
        self.holders = Holders(self)
        self.skipped = SkipCounter(self)

    @property
    def nodes(self) -> dict[str, Backend] | None:
        """A cluster's node backends by name; None on a single server."""
        return getattr(self.topology, "nodes", None)

    @property
    def cluster(self) -> ClusterBackend | None:
        """A cluster (backends/cluster.py: its nodes, topology and hooks); None on a single server."""
        return getattr(self.topology, "cluster", None)

    @property
    def _watcher(self) -> asyncio.Task | None:
        return self.watcher.task

    # ------------------------------------------------------------ listeners
    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def unsubscribe(self, listener: Listener) -> None:
        with contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    @property
    def has_listeners(self) -> bool:
        return bool(self._listeners)

    def emit(self, event: Event) -> None:
        """Tell every listener.  A listener that raises is reported (a note to the
        others, a log line) and never stops the race: the statement goes on, the
        session is freed as usual."""
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception as exc:
                self._listener_failed(listener, event, exc)

    def _listener_failed(self, listener: Listener, event: Event, exc: Exception) -> None:
        what = f"a listener failed on {type(event).__name__}: {type(exc).__name__}: {exc}"
        self.listener_failures.append(what)
        log.error("lockrace: %s", what, exc_info=exc)
        if self._reporting:
            return  # a listener that fails on the note itself: logged, not said again
        self._reporting = True
        try:
            note = ServerNote("", perf_counter_ns(), what, "error")
            for other in list(self._listeners):
                if other is not listener:
                    with contextlib.suppress(Exception):
                        other(note)
        finally:
            self._reporting = False

    # ------------------------------------------------------------ nodes
    def node_for(self, name: str) -> str:
        """The node session ``name`` sits on ("" on a single server)."""
        return self.topology.node_for(name)

    def monitor_for(self, session: Session) -> MonitorConnection | None:
        return self.monitors.get(session.node, self.monitor)

    def name_of(self, ident: int, node: str = "") -> str:
        """The session with backend ``ident`` on ``node`` (idents are per server)."""
        return self.holders.name_of(ident, node)

    def holder_name(self, ident: int, node: str = "") -> str:
        """A lock holder by name: a session of this race, or another client (foreign)."""
        return self.holders.holder_name(ident, node)

    # ------------------------------------------------------------ lifecycle
    async def open(self) -> "Race":
        await self.watcher.open_monitors()
        nodes = [self.node_for(n) for n in self.names]
        conns = await asyncio.gather(*(self.topology.backend_for(node).connect_session(n)
                                       for n, node in zip(self.names, nodes)), return_exceptions=True)
        failure = next((c for c in conns if isinstance(c, BaseException)), None)
        if failure is not None:
            for c in conns:
                if not isinstance(c, BaseException):
                    await c.close()
            await self.watcher.close_monitors()
            if isinstance(failure, ConnectError) and _TOO_MANY.search(str(failure)):
                # more sessions than the server accepts (max_connections, a per-role limit)
                raise ConnectError(f"{failure}; this race needs {len(self.names) + 1} connections"
                                   f" ({len(self.names)} sessions and a monitor) at once") from None
            raise failure
        opened = [c for c in conns if not isinstance(c, BaseException)]
        for name, node, conn in zip(self.names, nodes, opened):
            self.sessions[name] = Session(name, conn, self.backend.flavor, node)
        await asyncio.gather(*(self.statements.refresh_state(s) for s in self.sessions.values()))
        self.watcher.start()
        return self

    async def add_session(self, name: str) -> Session:
        if name in self.sessions:
            return self.sessions[name]
        self.names.append(name)
        node = self.node_for(name)
        try:
            conn = await self.topology.backend_for(node).connect_session(name)
        except BaseException:
            self.names.remove(name)
            raise
        session = Session(name, conn, self.backend.flavor, node)
        self.sessions[name] = session
        await self.statements.refresh_state(session)
        return session

    async def close(self, grace: float = 2.0) -> None:
        """Cancel what runs, roll back what is open (prepared transactions too),
        close every connection.  Every step is bounded by ``grace`` seconds, so
        a server that does not answer (frozen, unreachable) cannot hold it.  A
        caller cancelled while it closes (a screen torn down twice) still has
        it finish: no connection is left open; the cancel is raised after."""
        await cleanup.close(self, grace)

    async def release_prepared(self, timeout: float = 2.0) -> list[str]:
        """Roll back the prepared transactions this race's sessions left behind
        (PREPARE TRANSACTION / XA PREPARE without COMMIT/ROLLBACK PREPARED).

        MariaDB/MySQL: on the session that prepared it when that connection still
        works (only the owner may finish an attached XA transaction), otherwise (and
        on PostgreSQL always) on a short-lived connection of its own.  Returns what could not be rolled back.
        """
        return await cleanup.release_prepared(self, timeout)

    async def reconnect(self) -> None:
        """New connections for every session (after a server restart)."""
        await self.watcher.stop()
        for s in self.sessions.values():
            with contextlib.suppress(Exception):
                await s.conn.close()
        await self.watcher.close_monitors()
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
        return self.statements.submit(name, sql)

    async def run(self, name: str, sql: str) -> StatementResult:
        """Run ``sql`` in session ``name``; returns as soon as the server's answer is in.

        An answer that needs nothing more from the server reaches the caller from
        the driver's own look (see ``Statements.answer``); the listeners hear of it on
        the loop's next turn.  Who holds the lock a refused statement wanted is a
        further question to the server, asked after the answer: it lands in the
        same result (``held_by``, and a ``StatementExplained`` event) before the
        session takes its next statement; ``settled`` waits for all of it."""
        return await self.statements.run(name, sql)

    async def settled(self, name: str) -> None:
        """Wait until session ``name`` is free: its statement answered and everything
        asked after the answer (``held_by``) is in."""
        stmt = self.sessions[name].running
        if stmt is not None:
            await stmt.done.wait()

    async def wait_blocked_or_done(self, stmt: RunningStatement, timeout: float) -> bool:
        """True once the server reports ``stmt`` blocked or it finished."""
        try:
            await asyncio.wait_for(stmt.blocked.wait(), timeout)
            return True
        except asyncio.TimeoutError:
            return False

    async def poll_waits(self) -> None:
        """Ask the server (every node of a cluster) now who waits on whom, and emit what changed."""
        await self.watcher.poll_waits()

    async def cancel(self, name: str) -> bool:
        """Ask the server to cancel the statement running in session ``name``."""
        session = self.sessions[name]
        monitor = self.monitor_for(session)
        if session.running is None or monitor is None:
            return False
        replace = self.watcher.replace_monitor
        if monitor.closed:
            await replace(session.node)
            monitor = self.monitor_for(session)
            if monitor is None:
                return False
        try:
            done = await within(monitor.cancel(session.ident), CANCEL_S)
        except asyncio.TimeoutError:
            return False  # the server does not answer
        except Exception:
            if not await replace(session.node):
                raise
            return await self._cancel_anew(session)
        if not done and monitor.closed and await replace(session.node):
            # the server had ended the monitor's connection (found out only now: an idle
            # MariaDB monitor does not look at the lock views on a timer): once more, anew
            return await self._cancel_anew(session)
        return done

    async def _cancel_anew(self, session: Session) -> bool:
        """``cancel`` once more, on the monitor that replaced a closed one."""
        monitor = self.monitor_for(session)
        if monitor is None:
            return False
        return await within(monitor.cancel(session.ident), CANCEL_S)

    async def rollback(self, name: str) -> StatementResult | None:
        session = self.sessions[name]
        if session.running is not None:
            await self.cancel(name)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(session.running.done.wait(), 5)
        if session.running is not None:
            return None
        return await self.run(name, "ROLLBACK")
