"""One session of a race: a name (A, B, ...), one real connection, one
statement at a time, and what the engine knows about it."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from ..backends.base import SessionConnection
from ..core.events import Budget, LockInfo, StatementResult
from ..core.outcome import asks_nowait, wait_seconds
from ..core.states import TxnState

if TYPE_CHECKING:
    from .budget_book import BudgetBook

_PG_LOCK_TABLE = re.compile(r"^\s*LOCK\b", re.IGNORECASE)
_SET_STATEMENT = re.compile(r"^\s*SET\s+STATEMENT\s+(.*?)\s+FOR\s+(.*)$", re.IGNORECASE | re.DOTALL)
_ASSIGNMENT = re.compile(r"(\w+)\s*=\s*([0-9.]+)")
_DDL = re.compile(r"^\s*(ALTER|CREATE|DROP|TRUNCATE|RENAME|LOCK\s+TABLES?|OPTIMIZE|ANALYZE)\b", re.IGNORECASE)


@dataclass(slots=True)
class RunningStatement:
    stmt_id: int
    sql: str
    started_ns: int
    budget: Budget | None
    task: asyncio.Task | None = None
    launch: asyncio.TimerHandle | None = None  # the task's start, due once the server has had the CPU
    announced: bool = False  # StatementStarted is out (emitted as it was sent)
    text_read: bool = False  # touches_budgets, may_prepare and skip_locked are set
    told_early: bool = False  # answered at the error, before the server was ready again (see Race._on_answer)
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
    skip_locked: bool = False  # SKIP LOCKED: the rows it passed over are counted after it
    answered: asyncio.Event = field(default_factory=asyncio.Event)  # the server's answer is in: ``result``
    waiter: asyncio.Future | None = None  # Race.run's own wait for the answer
    on_sent: Callable[[asyncio.Future], None] | None = None  # the callback that starts the task if the answer comes before its timer
    done: asyncio.Event = field(default_factory=asyncio.Event)  # and what was asked after it: the session is free
    blocked: asyncio.Event = field(default_factory=asyncio.Event)  # the server reports it blocked (or it is done)
    result: StatementResult | None = None


class Session:
    def __init__(self, name: str, conn: SessionConnection, flavor: str, node: str = ""):
        self.name = name
        self.node = node  # cluster races: the node this session's connection is on
        self.conn = conn
        self.flavor = flavor
        self.running: RunningStatement | None = None
        self.txn: TxnState = TxnState.IDLE
        self.budgets: tuple[Budget, ...] = ()
        self.book: BudgetBook | None = None  # its BudgetBook, once the budgets were read at connect (see Race._refresh_state)
        self.last: StatementResult | None = None
        self.wrote_in_txn = False  # an INSERT/UPDATE/DELETE ran in the open transaction
        # MariaDB/MySQL metadata locks, as the session's own statements tell
        self.tables_in_txn: set[str] = set()  # tables its open transaction touched
        self.locked_tables: set[str] = set()  # LOCK TABLES
        self.global_read_lock = False  # FLUSH TABLES WITH READ LOCK
        self._plain_for: tuple[Budget, ...] | None = None  # the budgets _plain was worked out for
        self._plain: dict[bool, Budget | None] = {}  # a plain statement's budget (key: a metadata-lock wait)

    @property
    def ident(self) -> int:
        return self.conn.ident

    @property
    def busy(self) -> bool:
        return self.running is not None

    def budget_for(self, sql: str, metadata: bool = False) -> Budget | None:
        """The wait budget that will end a lock wait of this statement, if any
        (see ``_budget_read``).  A statement that names no budget of its own
        (no NOWAIT, WAIT n or SET STATEMENT) gets the session's: worked out once
        per set of budgets, not read again from each statement's text."""
        upper = sql.upper()
        if "WAIT" in upper or "STATEMENT" in upper:
            return self._budget_read(sql, metadata)
        ddl = metadata or (self.flavor != "postgres" and _DDL.match(sql) is not None)
        if self._plain_for is not self.budgets:
            self._plain_for, self._plain = self.budgets, {}
        if ddl not in self._plain:
            self._plain[ddl] = self._budget_read("", ddl)
        return self._plain[ddl]

    def _budget_read(self, sql: str, metadata: bool = False) -> Budget | None:
        """The wait budget that will end a lock wait of this statement, if any.

        MariaDB/MySQL: ``SET STATEMENT var = n FOR ...`` overrides the session's
        value for that statement; a metadata-lock wait (DDL, or any statement
        the server reported waiting on one: ``metadata``) is bounded by
        lock_wait_timeout, a row wait by innodb_lock_wait_timeout; either at 0
        means no wait at all (a refusal), shown as ``name = 0``.
        """
        values = {b.name: b.ms for b in self.budgets}
        prefix = ""
        if self.flavor != "postgres":
            m = _SET_STATEMENT.match(sql)
            if m:
                for name, value in _ASSIGNMENT.findall(m.group(1)):
                    try:
                        seconds = float(value)
                    except ValueError:
                        continue
                    values[name.lower()] = seconds if name.lower() == "max_execution_time" else seconds * 1000
                prefix = "SET STATEMENT "
                sql = m.group(2)
            if asks_nowait(sql):
                return Budget("NOWAIT", 0.0)
            wait = wait_seconds(sql)
            if wait is not None:
                text, seconds = wait
                label = f"WAIT {text}" if text == str(seconds) else f"WAIT {text} (read as {seconds})"
                return Budget(label, seconds * 1000.0)
        elif _PG_LOCK_TABLE.match(sql) and asks_nowait(sql):
            return Budget("NOWAIT", 0.0)  # LOCK ... NOWAIT refuses the table lock at once
        if self.flavor == "postgres":
            names = ["lock_timeout", "statement_timeout"]
        else:
            lock_budget = "lock_wait_timeout" if metadata or _DDL.match(sql) else "innodb_lock_wait_timeout"
            if values.get(lock_budget) == 0:  # no wait at all: the server refuses at once
                return Budget(f"{prefix}{lock_budget} = 0", 0.0)
            names = [lock_budget, "max_statement_time", "max_execution_time"]
        candidates = [Budget(prefix + n if prefix and m and re.search(rf"\b{n}\b", m.group(1), re.IGNORECASE) else n,
                             values[n]) for n in names if values.get(n, 0) > 0]
        if not candidates:
            return None
        return min(candidates, key=lambda b: b.ms)
