"""The race's monitor connections and the loop that watches the sessions.

While any statement runs, the watcher asks the server (every node of a
cluster) who waits on whom and turns what changed into ``StatementBlocked`` /
``StatementUnblocked`` events; blocked is what the server says, never a guess
from the clock.  A monitor connection the server ended is replaced (and said
so in a note); a session that lost its connection has the server probed on a
fresh one, so that a server that is gone shows on every session at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from time import perf_counter_ns
from typing import TYPE_CHECKING

from ..core.events import ServerNote, SessionState, StatementBlocked, StatementUnblocked
from ..core.states import TxnState
from .cleanup import within
from .statement import State

if TYPE_CHECKING:
    from ..backends.base import MonitorConnection
    from .race import Race
    from .session import Session

POLL_S = 0.004  # while some running statement is not yet known to be blocked
POLL_BLOCKED_S = 0.1  # while every running statement is already blocked (blocker changes)
# (MariaDB's monitor spaces its own reads further apart: backends/mysql.py)


class Watcher:
    def __init__(self, race: Race):
        self.race = race
        self.wake = asyncio.Event()
        self.task: asyncio.Task | None = None
        self.lost_probe: asyncio.Task | None = None

    # ------------------------------------------------------------ monitors
    async def open_monitors(self) -> None:
        race = self.race
        race.monitors = await race.topology.open_monitors()
        race.monitor = next(iter(race.monitors.values()))

    async def close_monitors(self) -> None:
        race = self.race
        for monitor in set(race.monitors.values()) | ({race.monitor} if race.monitor else set()):
            with contextlib.suppress(Exception):
                await monitor.close()
        race.monitors = {}
        race.monitor = None

    async def replace_monitor(self, node: str | None = None) -> bool:
        """A monitor's connection was ended (pg_terminate_backend, KILL,
        idle_session_timeout, a pooler): open a new one so that blocked-detection
        and cancelling go on.  ``node`` None: every closed monitor.  False when
        none was replaced (none closed, or the server cannot be reached)."""
        race = self.race
        nodes = [node] if node is not None else list(race.monitors) or [""]
        replaced = False
        for name in nodes:
            old = race.monitors.get(name, race.monitor)
            if old is not None and not old.closed:
                continue
            try:
                fresh = await within(race.topology.backend_for(name).connect_monitor(), 5)
                await within(race.topology.node_opened(name, fresh), 5)
            except (asyncio.TimeoutError, Exception):
                continue
            race.monitors[name] = fresh
            if old is race.monitor or race.monitor is None:
                race.monitor = fresh
            if old is not None:
                with contextlib.suppress(Exception):
                    await within(old.close(), 1)
            replaced = True
            where = f" ({name})" if name else ""
            race.emit(ServerNote("", perf_counter_ns(), f"monitor connection{where} was closed by the server; reconnected",
                                 "warning"))
        if replaced:
            race.monitor_error = ""
        return replaced

    # ------------------------------------------------------------ the loop
    def start(self) -> None:
        self.task = asyncio.create_task(self._watch(), name="lockrace-watcher")

    async def stop(self, timeout: float | None = None) -> None:
        """Stop the loop; with ``timeout``, wait at most that long for it to end."""
        self.stop_lost_probe()
        task, self.task = self.task, None
        if task is None:
            return
        task.cancel()
        if timeout is not None:
            await asyncio.wait({task}, timeout=timeout)
        else:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def statement_started(self, session: Session) -> None:
        """The watcher's first look is due once the statement has reached the server:
        woken then, it stays out of the way of an answer that comes sooner (a NOWAIT refusal)."""
        first_look = self._first_poll_s(session)
        if first_look > 0:
            asyncio.get_running_loop().call_later(first_look, self.wake.set)
        else:
            self.wake.set()

    def _first_poll_s(self, session: Session) -> float:
        monitor = self.race.monitor_for(session)
        return getattr(monitor, "first_poll_s", 0.0) if monitor is not None else 0.0

    async def _watch(self) -> None:
        race = self.race
        failures = 0
        while True:
            self.wake.clear()  # a submit from here on wakes the next wait at once
            running = [s for s in race.sessions.values() if s.running is not None]
            if not running:
                await self.wake.wait()
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
                race.monitor_error = ""
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failures += 1
                race.monitor_error = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                if failures == 1:
                    race.emit(ServerNote("", perf_counter_ns(), f"monitor: {race.monitor_error}", "error"))
                if await self.replace_monitor():
                    failures = 0
                    continue
                await asyncio.sleep(min(0.5, 0.02 * failures))
                continue
            all_blocked = all(s.running is not None and s.running.blocked_since is not None for s in running)
            if all_blocked:
                # Nothing new to learn quickly: a finish arrives as the statement's
                # own answer, and a new statement wakes this wait at once.
                timeout = race.topology.blocked_poll_s(POLL_BLOCKED_S)
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self.wake.wait(), timeout)
            else:
                await asyncio.sleep(POLL_S)

    # ------------------------------------------------------------ waits
    async def _node_waits(self, node: str, sessions: list[Session]):
        race = self.race
        monitor = race.monitors.get(node, race.monitor)
        if monitor is None:
            return {}
        idents = [s.ident for s in sessions]
        reports = await monitor.waits(idents)
        return await race.topology.waits(node, monitor, idents, reports)

    async def poll_waits(self) -> None:
        """Ask the server (every node of a cluster) now who waits on whom, and emit what changed."""
        race = self.race
        running = [s for s in race.sessions.values() if s.running is not None]
        if not running or race.monitor is None:
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
            if stmt is None or not stmt.waiting or stmt is not asked[s.name]:
                continue  # answered while we asked: the answer is about that statement, not a newer one
            report = per_node[s.node].get(s.ident)
            # an answer read before this statement began says nothing about it (MariaDB's
            # InnoDB views, answered from the last read within 100 ms)
            taken = report.taken_ns if report is not None else \
                getattr(race.monitors.get(s.node, race.monitor), "snapshot_ns", None)
            if taken is not None and stmt.started_ns > taken:
                continue
            if report is not None:
                # a blocker that is a server process (the startup process on a hot standby) by its name
                blockers = tuple(report.process_names.get(i) or race.holder_name(i, s.node) for i in report.blockers)
                if not blockers and report.lock is not None and report.lock.kind == "metadata" \
                        and s.dialect.tracks_metadata_locks:
                    blockers = race.holders.metadata_holders(s, report.lock, per_node_monitor=race.monitors.get(
                        s.node, race.monitor))
                if report.budget is not None:
                    stmt.budget = report.budget
                elif report.lock is not None and report.lock.kind == "metadata" and s.dialect.tracks_metadata_locks:
                    # a metadata-lock wait is bounded by lock_wait_timeout, whatever the statement
                    stmt.budget = s.budget_for(stmt.sql, metadata=True)
                shown = report.lock.describe() if report.lock else None  # a report says news only if its words change
                if stmt.blocked_since is None or (blockers and blockers != stmt.blockers) or (
                        shown is not None and shown != (stmt.lock.describe() if stmt.lock else None)):
                    if stmt.blocked_since is None:
                        stmt.blocked_since = now
                        stmt.to(State.BLOCKED)
                        if report.waiting_s is not None:
                            # the server says when the wait began (PostgreSQL 14+)
                            stmt.blocked_since = max(stmt.started_ns, now - int(report.waiting_s * 1e9))
                    stmt.blockers = blockers or stmt.blockers
                    stmt.blockers_seen += tuple(b for b in blockers if b not in stmt.blockers_seen)
                    stmt.lock = report.lock or stmt.lock
                    if report.lock is not None and report.lock not in stmt.locks_seen:
                        stmt.locks_seen += (report.lock,)
                    stmt.ever_blocked = True
                    race.emit(StatementBlocked(s.name, now, stmt.stmt_id, stmt.blockers, stmt.lock, stmt.started_ns,
                                               budget=stmt.budget, node=s.node))
                    stmt.blocked.set()
            elif stmt.blocked_since is not None:
                stmt.waited_ns += now - stmt.blocked_since
                stmt.blocked_since = None
                stmt.to(State.SENT)
                stmt.blocked.clear()
                race.emit(StatementUnblocked(s.name, now, stmt.stmt_id, node=s.node))

    # ------------------------------------------------------------ a lost server
    def probe_lost_server(self, first: Session) -> None:
        if self.lost_probe is None:
            self.lost_probe = asyncio.create_task(self._probe_server(first), name="lockrace-lost-probe")

    def stop_lost_probe(self) -> None:
        if self.lost_probe is not None:
            self.lost_probe.cancel()
            self.lost_probe = None

    async def _probe_server(self, first: Session) -> None:
        """One session lost its connection: is the server gone, or just that backend?

        A fresh connection answers without touching any session's connection.
        If the server cannot be reached, every other idle session is marked
        closed at once (listeners show "connection lost" everywhere), instead of
        each finding out on its next statement.
        """
        race = self.race
        backend = race.topology.backend_for(first.node)
        try:
            try:
                probe: MonitorConnection = await within(backend.connect_monitor(), 5)
            except Exception:
                reachable = False
            else:
                reachable = True
                with contextlib.suppress(Exception):
                    await probe.close()
            if reachable:
                return
            where = backend.server_name + (f" on {first.node}" if first.node else "")
            race.emit(ServerNote("", perf_counter_ns(), f"lost the connection to {where}", "error", node=first.node))
            for s in list(race.sessions.values()):
                if s is not first and s.node == first.node and s.running is None and s.txn != "closed":
                    s.txn = TxnState.CLOSED
                    race.emit(SessionState(s.name, perf_counter_ns(), "closed", s.budgets, s.ident, node=s.node))
        finally:
            self.lost_probe = None
