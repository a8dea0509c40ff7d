"""What the engine needs from a database driver.

A backend opens session connections (one per session, runs one statement at a
time) and one monitor connection per server, which asks the server's own lock
views who waits on whom and cancels statements.  Backends never import
Textual and never decide anything from elapsed time.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Callable

from ..core.events import Budget, LockInfo, StatementResult


class ConnectError(Exception):
    """A server could not be reached or refused us: one clear sentence."""


@dataclass(frozen=True)
class WaitReport:
    """The server says backend ``ident`` waits for a lock held by ``blockers``."""

    ident: int
    blockers: tuple[int, ...]
    lock: LockInfo | None
    waiting_s: float | None = None
    """How long the server says this wait has lasted (PostgreSQL: pg_locks.waitstart)."""
    process_names: dict[int, str] = field(default_factory=dict)
    """Blockers that are server processes, not sessions (PostgreSQL: the startup process)."""
    budget: Budget | None = None
    """The budget that really bounds this kind of wait, when it is not the statement's
    lock budget (Galera's causal wait: repl.causal_read_timeout)."""
    taken_ns: int | None = None
    """perf_counter_ns() when the views behind this report were read, when that may be
    before the call (MariaDB's InnoDB views); None: read by this call."""


@dataclass(frozen=True)
class RowLockHolders:
    """Rows of a table locked by other backends, as far as the server tells."""

    holders: tuple[int, ...]
    count: int | None  # None: the server names holders but not how many rows


class SessionConnection(ABC):
    ident: int = 0  # backend pid / connection id
    closed: bool = False

    def send(self, sql: str, on_answer: Callable[[StatementResult, bool], None] | None = None) -> object | None:
        """Send ``sql`` at once, from the caller's thread, without waiting for the
        server (a driver that can queue a query without blocking); ``execute`` then
        reads its answer.  None: not sent here, ``execute`` sends it.  ``on_answer``:
        called on the loop with the answer the moment it is in, before ``execute``'s
        caller wakes up (a driver that reads answers on the loop), as
        ``on_answer(result, True)``; an error may be told first as it arrives, while
        the server still ends the statement, as ``on_answer(result, False)`` (the
        same result object: the session's state is not known yet)."""
        return None

    @abstractmethod
    async def execute(self, sql: str, sent: object | None = None) -> StatementResult:
        """Run ``sql`` (one or more statements), or read the answer to it when
        ``send`` already sent it (``sent`` is what ``send`` returned); never raises
        for SQL errors."""

    @abstractmethod
    async def txn_state(self) -> str:
        """idle, in transaction, failed transaction or closed."""

    def txn_state_now(self) -> str | None:
        """``txn_state`` when the driver knows it without asking the server (the
        status of the last answer); None: ask with ``txn_state``."""
        return None

    @abstractmethod
    async def budgets(self) -> tuple[Budget, ...]:
        """Wait budgets read back from the server (0 ms = no limit)."""

    @abstractmethod
    async def close(self) -> None: ...


class MonitorConnection(ABC):
    ident: int = 0  # the monitor's own backend pid / connection id
    snapshot_ns: int | None = None
    """perf_counter_ns() when the lock views behind the last ``waits`` answer were read,
    where that answer may be older than the call (MariaDB); None: always fresh.  It
    says nothing about a statement started after it."""
    first_poll_s: float = 0.001
    """How long after a statement is sent the first look at the lock views waits: a
    look before the statement reached the server finds nothing, and competes with
    the send for the process (the caller sees it as overhead)."""

    @property
    def closed(self) -> bool:
        """True once the server ended this connection (it must be replaced)."""
        return False

    def blocked_poll_s(self, default: float) -> float | None:
        """How long to wait before looking again while every statement waits
        (None: until a statement starts or finishes)."""
        return default

    @abstractmethod
    async def waits(self, idents: list[int]) -> dict[int, WaitReport]:
        """Which of ``idents`` the server reports waiting on a lock."""

    @abstractmethod
    async def cancel(self, ident: int) -> bool:
        """Cancel the statement running on backend ``ident``."""

    @abstractmethod
    async def terminate(self, ident: int) -> bool:
        """End backend ``ident``'s connection (used when cleaning up)."""

    @abstractmethod
    async def plain_read(self, sql: str) -> list[tuple] | None:
        """Run a non-locking read for SKIP LOCKED accounting; None if it cannot."""

    async def skip_reads(self, sql: str) -> tuple[list[tuple] | None, list[tuple] | None]:
        """For SKIP LOCKED accounting on the monitor: (the read as committed, the read
        of the rows' newest versions or None)."""
        return await self.plain_read(sql), None

    @abstractmethod
    async def row_lock_holders(self, table: str, exclude: int) -> RowLockHolders:
        """Backends other than ``exclude`` holding row locks on ``table`` (not
        those that only wait for one)."""

    async def refusal_holders(self, sql: str, message: str, exclude: int) -> tuple[int, ...] | None:
        """Right after a NOWAIT refusal: the other backends holding locks on the table it
        wanted, as far as the server's lock views tell (None: they cannot tell)."""
        table = refused_table(sql, message)
        if table is None:
            return None
        return (await self.row_lock_holders(table, exclude)).holders

    @abstractmethod
    async def close(self) -> None: ...


class Backend(ABC):
    engine: str  # postgres | mysql
    flavor: str  # postgres | mariadb | mysql8
    version: str  # "18.6", "10.11.19"
    admin_timeout: float = 10.0
    """Seconds any statement lockrace issues for itself (setup, teardown, sandbox)
    may take, lock waits included; ``lockrace run --step-timeout`` sets it."""

    @abstractmethod
    async def connect_session(self, name: str) -> SessionConnection: ...

    @abstractmethod
    async def connect_monitor(self) -> MonitorConnection: ...

    @abstractmethod
    async def run_admin(self, sqls: list[str]) -> None:
        """Run setup/teardown SQL in the sandbox on a short-lived connection."""

    @abstractmethod
    async def reset_sandbox(self) -> None:
        """Empty lockrace's own schema/database (and create it if missing)."""

    @abstractmethod
    async def drop_sandbox(self) -> None: ...

    @property
    def server_name(self) -> str:
        names = {"postgres": "PostgreSQL", "mariadb": "MariaDB", "mysql8": "MySQL"}
        return f"{names.get(self.flavor, self.flavor)} {self.version}"


# ----------------------------------------------------------------- SQL helpers

_LOCKING_CLAUSE = re.compile(
    r"\s+(FOR\s+(?:NO\s+KEY\s+)?UPDATE|FOR\s+(?:KEY\s+)?SHARE|LOCK\s+IN\s+SHARE\s+MODE)"
    r"(\s+OF\s+[\w.\",\s]+?)?\s+SKIP\s+LOCKED",
    re.IGNORECASE,
)
_LIMIT = re.compile(r"\s+LIMIT\s+(\d+)(\s+OFFSET\s+\d+)?", re.IGNORECASE)
_FROM_TABLE = re.compile(r"\bFROM\s+([A-Za-z_][\w$]*)", re.IGNORECASE)


def skip_probe(sql: str) -> tuple[str, int | None, str | None] | None:
    """For a plain ``SELECT ... FOR UPDATE SKIP LOCKED [LIMIT n]``: the same read
    without its locking clause and LIMIT, the LIMIT, and the table it reads.

    None when the statement is not a single SELECT we can rewrite safely.
    """
    body = sql.strip().rstrip(";").strip()
    if ";" in body or not re.match(r"(?is)^select\b", body):
        return None
    if not _LOCKING_CLAUSE.search(body):
        return None
    probe = _LOCKING_CLAUSE.sub("", body)
    limit = None
    m = _LIMIT.search(probe)
    if m:
        limit = int(m.group(1))
        if m.group(2):
            return None  # OFFSET makes "which rows were passed over" ambiguous
        probe = probe[: m.start()] + probe[m.end() :]
    table = _FROM_TABLE.search(probe)
    return probe, limit, table.group(1) if table else None


_QUOTED_RELATION = re.compile(r'relation "([^"]+)"')
_STATEMENT_TABLE = re.compile(r"\b(?:FROM|UPDATE|INTO|TABLE)\s+`?([A-Za-z_][\w$]*)`?", re.IGNORECASE)


def refused_table(sql: str, message: str) -> str | None:
    """The table a refused statement wanted: the one the server's message names, else the statement's."""
    m = _QUOTED_RELATION.search(message or "") or _STATEMENT_TABLE.search(sql or "")
    return m.group(1) if m else None


def count_passed_over(seen: list[tuple], got: list[tuple], limit: int | None,
                      latest: list[tuple] | None = None, own_changes: int = 0) -> int:
    """Rows a SKIP LOCKED read passed over because other transactions lock them.

    ``seen``: the same read without locking, as this session sees the rows (its
    own uncommitted changes included, PostgreSQL) or as committed (MariaDB's
    monitor).  ``latest`` (MariaDB): the same read at READ UNCOMMITTED, the rows'
    newest versions, where rows another transaction is still inserting appear
    (InnoDB's locking read finds them and skips them) and rows this session
    deleted are gone.  A row in both that was not returned was skipped; a row
    in only one of them is one side of an uncommitted change, counted once
    (an update shows its old row in ``seen`` and its new one in ``latest``).
    Rows only in ``seen`` are deleted by someone: counted only when this
    session changed no rows itself (``own_changes``), since InnoDB does not
    say whose uncommitted delete a row carries.
    """
    old = _passed_over(seen, got, limit)
    if latest is None:
        return len(old)
    new = _passed_over(latest, got, limit)
    rest = list(new)
    both = 0
    for row in old:
        if row in rest:
            rest.remove(row)
            both += 1
    only_old = len(old) - both if own_changes == 0 else 0
    return both + max(only_old, len(rest))


def _passed_over(plain: list[tuple], got: list[tuple], limit: int | None) -> list[tuple]:
    remaining = list(got)
    if limit is None or len(got) < limit:
        candidates = plain
    else:
        last = got[-1] if got else None
        cut = len(plain)
        if last is not None:
            for idx in range(len(plain) - 1, -1, -1):
                if plain[idx] == last:
                    cut = idx
                    break
        candidates = plain[:cut]
    passed = []
    for row in candidates:
        if row in remaining:
            remaining.remove(row)
        else:
            passed.append(row)
    return passed


def mysql_tag(sql: str, rowcount: int, has_rows: bool, nrows: int) -> str:
    if has_rows:
        if nrows == 0:
            return "Empty set"
        return f"{nrows} row{'s' if nrows != 1 else ''} in set"
    verb = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
    if verb in ("INSERT", "UPDATE", "DELETE", "REPLACE") and rowcount >= 0:
        return f"Query OK, {rowcount} row{'s' if rowcount != 1 else ''} affected"
    return "Query OK"
