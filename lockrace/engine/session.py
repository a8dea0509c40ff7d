"""One session of a race: a name (A, B, ...), one real connection, one
statement at a time, and what the engine knows about it."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field

from ..backends.base import SessionConnection
from ..core.events import Budget, LockInfo, StatementResult
from ..core.outcome import asks_nowait, wait_seconds

_PG_LOCK_TABLE = re.compile(r"^\s*LOCK\b", re.IGNORECASE)
_DDL = re.compile(r"^\s*(ALTER|CREATE|DROP|TRUNCATE|RENAME|LOCK\s+TABLES?|OPTIMIZE|ANALYZE)\b", re.IGNORECASE)


@dataclass
class RunningStatement:
    stmt_id: int
    sql: str
    started_ns: int
    budget: Budget | None
    task: asyncio.Task | None = None
    blocked_since: int | None = None
    waited_ns: int = 0
    blockers: tuple[str, ...] = ()
    lock: LockInfo | None = None
    ever_blocked: bool = False
    done: asyncio.Event = field(default_factory=asyncio.Event)
    blocked: asyncio.Event = field(default_factory=asyncio.Event)
    result: StatementResult | None = None


class Session:
    def __init__(self, name: str, conn: SessionConnection, flavor: str, node: str = ""):
        self.name = name
        self.node = node  # cluster races: the node this session's connection is on
        self.conn = conn
        self.flavor = flavor
        self.running: RunningStatement | None = None
        self.txn = "idle"
        self.budgets: tuple[Budget, ...] = ()
        self.last: StatementResult | None = None

    @property
    def ident(self) -> int:
        return self.conn.ident

    @property
    def busy(self) -> bool:
        return self.running is not None

    def budget_for(self, sql: str) -> Budget | None:
        """The wait budget that will end a lock wait of this statement, if any."""
        if self.flavor != "postgres":
            if asks_nowait(sql):
                return Budget("NOWAIT", 0.0)
            wait = wait_seconds(sql)
            if wait is not None:
                text, seconds = wait
                label = f"WAIT {text}" if text == str(seconds) else f"WAIT {text} (read as {seconds})"
                return Budget(label, seconds * 1000.0)
        elif _PG_LOCK_TABLE.match(sql) and asks_nowait(sql):
            return Budget("NOWAIT", 0.0)  # LOCK ... NOWAIT refuses the table lock at once
        values = {b.name: b.ms for b in self.budgets}
        if self.flavor == "postgres":
            names = ["lock_timeout", "statement_timeout"]
        elif _DDL.match(sql):
            names = ["lock_wait_timeout", "max_statement_time", "max_execution_time"]
        else:
            names = ["innodb_lock_wait_timeout", "max_statement_time", "max_execution_time"]
        candidates = [Budget(n, values[n]) for n in names if values.get(n, 0) > 0]
        if not candidates:
            return None
        return min(candidates, key=lambda b: b.ms)
