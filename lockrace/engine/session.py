"""One session of a race: a name (A, B, ...), one real connection, one
statement at a time, and what the engine knows about it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..backends.base import SessionConnection
from ..core.events import Budget, StatementResult
from ..core.states import TxnState
from ..dialects import dialect_for
from .statement import RunningStatement

if TYPE_CHECKING:
    from .budget_book import BudgetBook

__all__ = ["RunningStatement", "Session"]


class Session:
    def __init__(self, name: str, conn: SessionConnection, flavor: str, node: str = ""):
        self.name = name
        self.node = node  # cluster races: the node this session's connection is on
        self.conn = conn
        self.flavor = flavor
        self.dialect = dialect_for(flavor)
        self.running: RunningStatement | None = None
        self.txn: TxnState = TxnState.IDLE
        self.budgets: tuple[Budget, ...] = ()
        self.book: BudgetBook | None = None  # its BudgetBook, once the budgets were read at connect (see Statements.refresh_state)
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
        ddl = metadata or self.dialect.is_metadata_wait(sql)
        if self._plain_for is not self.budgets:
            self._plain_for, self._plain = self.budgets, {}
        if ddl not in self._plain:
            self._plain[ddl] = self._budget_read("", ddl)
        return self._plain[ddl]

    def _budget_read(self, sql: str, metadata: bool = False) -> Budget | None:
        """The wait budget that will end a lock wait of this statement, if any: the
        server's rules, from its dialect (``Dialect.statement_budget``)."""
        return self.dialect.statement_budget(self.budgets, sql, metadata)
