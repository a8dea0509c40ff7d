"""Who is who in a race: backend idents by session name, lock holders by name
(a session of this race, or another client), the holders of a refused lock or
of a metadata lock the server's views do not name, a deadlock's cycle."""

from __future__ import annotations

import re
from time import perf_counter_ns
from typing import TYPE_CHECKING

from ..core.events import NO_MDL_INFO, StatementExplained, StatementResult
from . import explain as explain_mod
from .cleanup import within

if TYPE_CHECKING:
    from .race import Race
    from .session import Session
    from .statement import RunningStatement

# statements that ask for an exclusive metadata lock: while one waits for it, later
# requests on the table (even plain reads) queue behind it
_EXCLUSIVE_MDL = re.compile(r"^\s*(ALTER|DROP|TRUNCATE|RENAME|OPTIMIZE|CREATE\s+(UNIQUE\s+|FULLTEXT\s+|SPATIAL\s+)?INDEX)\b",
                            re.IGNORECASE)


class Holders:
    def __init__(self, race: Race):
        self.race = race

    def name_of(self, ident: int, node: str = "") -> str:
        """The session with backend ``ident`` on ``node`` (idents are per server)."""
        race = self.race
        for s in race.sessions.values():
            if s.ident == ident and s.node == node:
                return s.name
        named = race.topology.blocker_name(node, ident)
        if named:
            return named
        what = race.backend.dialect.session_ident(ident)
        return f"{what} on {node}" if node else what

    def holder_name(self, ident: int, node: str = "") -> str:
        """A lock holder by name: a session of this race, or another client (foreign)."""
        name = self.name_of(ident, node)
        if name in self.race.sessions:
            return name
        if self.race.topology.names_processes and not re.match(r"(pid|thread) \d+", name):
            return name  # a cluster's own process (replay, a node's applier)
        return f"another client ({name})"

    def metadata_holders(self, waiter: Session, lock, per_node_monitor=None) -> tuple[str, ...]:
        """A metadata-lock wait whose holder the server's views did not name: the sessions
        of this race that hold it as far as their own statements tell (FLUSH TABLES WITH
        READ LOCK, LOCK TABLES, an open transaction that touched the table); else say
        plainly that the server does not tell."""
        state = (lock.detail or "").lower()
        others = [x for x in self.race.sessions.values() if x is not waiter and x.node == waiter.node]
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

    async def name_refusal_holders(self, session: Session, stmt: RunningStatement, result: StatementResult) -> None:
        """A refusal names no holder: who holds locks on the table it wanted, as the
        server's lock views tell right after the answer."""
        race = self.race
        monitor = race.monitor_for(session)
        idents = None  # the views could not say: held_by stays None
        try:
            if monitor is not None:
                idents = await within(monitor.refusal_holders(stmt.sql, result.message, session.ident), 2)
        except Exception:
            pass
        if idents is not None:
            result.held_by = tuple(sorted(self.holder_name(i, session.node) for i in idents))
        # said whatever was found: a listener waiting to name the holder goes on
        race.emit(StatementExplained(session.name, perf_counter_ns(), stmt.stmt_id, result, node=session.node))

    async def explain_deadlock(self, session: Session, stmt: RunningStatement, result: StatementResult) -> None:
        """A deadlock victim: the server's account of the cycle, sessions by name (engine/explain.py)."""
        await explain_mod.deadlock(self.race, session, result)
        self.race.emit(StatementExplained(session.name, perf_counter_ns(), stmt.stmt_id, result, node=session.node))
