"""What the engine needs from a database driver.

A backend opens session connections (one per session, runs one statement at a
time) and one monitor connection per server, which asks the server's own lock
views who waits on whom and cancels statements.  Backends never import
Textual and never decide anything from elapsed time.
"""

from __future__ import annotations

import asyncio
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Callable

from ..core.events import Budget, LockInfo, StatementResult
from ..core.states import TxnState
from ..core.sqltext import NAME, NUMBER, OP, WORD, has_call, try_statements
from ..dialects import Dialect, dialect_for
from ..registry import TopologyName


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
    """What the engine needs of one session's connection, and all it uses: ``ident``
    (the server's name for it: backend pid / connection id, which the monitor's
    ``waits``, ``cancel`` and ``terminate`` take), ``send`` + ``execute`` (one
    statement text in, a ``StatementResult`` out, never an exception for SQL),
    the transaction state, the budgets, ``closed`` and ``close``.  A statement
    is cancelled from the monitor (``MonitorConnection.cancel(ident)``), never
    on the session's own connection."""

    ident: int = 0  # backend pid / connection id
    threaded: bool = False
    """Every statement is one blocking driver call on the session's own thread (no
    answer read on the loop): ``Backend.reads`` = "threaded"."""

    @property
    def closed(self) -> bool:
        """True once the connection is gone (the server ended it, or it was closed)."""
        return False

    def send(self, sql: str,
             on_answer: Callable[[StatementResult, bool], None] | None = None) -> asyncio.Future | None:
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
    async def execute(self, sql: str, sent: asyncio.Future | None = None) -> StatementResult:
        """Run ``sql`` (one or more statements), or read the answer to it when
        ``send`` already sent it (``sent`` is what ``send`` returned); never raises
        for SQL errors."""

    @abstractmethod
    async def txn_state(self) -> TxnState:
        """idle, in transaction, failed transaction or closed."""

    def txn_state_now(self) -> TxnState | None:
        """``txn_state`` when the driver knows it without asking the server (the
        status of the last answer); None: ask with ``txn_state``."""
        return None

    @abstractmethod
    async def budgets(self) -> tuple[Budget, ...]:
        """Wait budgets read back from the server (0 ms = no limit)."""

    @abstractmethod
    async def close(self) -> None: ...


class MonitorConnection(ABC):
    """What the engine needs of a server's monitor connection: who waits on whom
    (``waits``, from the server's own lock views, never from elapsed time), cancel
    and end a session's statement (``cancel``, ``terminate``), and the reads the
    explanations take (``row_lock_holders``, ``refusal_holders``, ``plain_read``,
    ``skip_reads``, ``deadlock_report``)."""

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

    async def deadlock_report(self) -> str | None:
        """The server's account of the latest deadlock, where it keeps one apart from the
        victim's error (InnoDB's LATEST DETECTED DEADLOCK); None: it keeps none, or it
        could not be read."""
        return None

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


READS_ENV = "LOCKRACE_READS"
READS = ("loop", "threaded")


def reads_from_env() -> str:
    """How sessions read their answers, as LOCKRACE_READS says: "loop" (the default: a
    short answer is read on the event loop, see docs/internals.md) or "threaded" (every
    statement is one blocking driver call on the session's own thread)."""
    import os

    value = os.environ.get(READS_ENV, "").strip().lower() or "loop"
    if value not in READS:
        raise ValueError(f"{READS_ENV}={value!r}: expected one of {', '.join(READS)}")
    return value


class Backend(ABC):
    family: str  # postgres | mysql (registry.Family: the driver and the SQL it speaks)
    topology: str = TopologyName.SINGLE  # a cluster's backend: its topology (registry.py)
    flavor: str  # postgres | mariadb | mysql8
    version: str  # "18.6", "10.11.19"
    sandbox: str  # lockrace's own schema (PostgreSQL) or database (MySQL family)
    admin_timeout: float = 10.0
    """Seconds any statement lockrace issues for itself (setup, teardown, sandbox)
    may take, lock waits included; ``lockrace run --step-timeout`` sets it."""
    reads: str | None = None
    """How the sessions opened from now on read answers: "loop" or "threaded" (see
    ``reads_from_env``); None: as LOCKRACE_READS says."""

    def threaded_reads(self) -> bool:
        """Whether a new session does every statement on its own thread (no fast path)."""
        reads = self.reads if self.reads is not None else reads_from_env()
        if reads not in READS:
            raise ValueError(f"reads={reads!r}: expected one of {', '.join(READS)}")
        return reads == "threaded"

    @property
    def dialect(self) -> Dialect:
        """What differs between the servers, for the engine to ask (lockrace/dialects):
        read from ``flavor``, which a MariaDB/MySQL backend learns as it connects."""
        return dialect_for(self.flavor)

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
        return f"{self.dialect.label} {self.version}"


# ----------------------------------------------------------------- SQL helpers

class NoProbe(Exception):
    """Why a SKIP LOCKED read's passed-over rows are not counted (one sentence)."""


def skip_probe(sql: str, dialect: str = "postgres") -> tuple[str, int | None, str | None]:
    """For a plain ``SELECT ... FOR UPDATE SKIP LOCKED [LIMIT n | FETCH FIRST n ROWS ONLY]``:
    the same read without its locking clause and its limit (to be run on lockrace's own
    connection, never the session's), the limit, and the table it reads.

    Raises NoProbe with the reason when the read cannot be repeated without changing
    anything or being wrong: more than one statement, not a SELECT, a function call
    (it may write, or give other values when run again: nextval(), clock_timestamp(),
    UUID(), RAND(), a function of the user's), an OFFSET or a limit that is not a
    plain number.
    """
    stmts = try_statements(sql, dialect)
    if not stmts or len(stmts) != 1:
        raise NoProbe("not a single SELECT")
    toks = stmts[0]
    if not toks[0].is_word("SELECT"):
        raise NoProbe("not a plain SELECT")
    if has_call(toks):
        raise NoProbe("it calls a function, which running it again could repeat")
    cut: list[tuple[int, int]] = []  # token index ranges to leave out
    limit: int | None = None
    depth, i, n = 0, 0, len(toks)
    locking = False
    while i < n:
        tok = toks[i]
        if tok.kind == OP and tok.value == "(":
            depth += 1
        elif tok.kind == OP and tok.value == ")":
            depth -= 1
        elif depth == 0 and tok.is_word("FOR") and i + 1 < n and toks[i + 1].is_word("UPDATE", "SHARE", "NO", "KEY"):
            j = i + 1
            while j < n and not toks[j].is_word("LIMIT", "FETCH", "OFFSET", "FOR"):
                j += 1
            clause = [t.value for t in toks[i:j] if t.kind == WORD]
            if "SKIP" in clause:
                locking = True
            cut.append((i, j))
            i = j
            continue
        elif depth == 0 and tok.is_word("LOCK") and i + 2 < n and toks[i + 1].is_word("IN"):
            # LOCK IN SHARE MODE, and what may follow it on MariaDB: SKIP LOCKED, NOWAIT, WAIT n
            j = min(n, i + 4)
            while j < n and not toks[j].is_word("LIMIT", "FETCH", "OFFSET", "FOR", "LOCK"):
                j += 1
            if "SKIP" in [t.value.upper() for t in toks[i:j] if t.kind == WORD]:
                locking = True
            cut.append((i, j))
            i = j
            continue
        elif depth == 0 and tok.is_word("OFFSET"):
            raise NoProbe("OFFSET makes which rows were passed over ambiguous")
        elif depth == 0 and tok.is_word("LIMIT"):
            if i + 1 < n and toks[i + 1].kind == NUMBER and toks[i + 1].value.isdigit() and \
                    (i + 2 == n or toks[i + 2].kind == WORD):
                limit = int(toks[i + 1].value)
                cut.append((i, i + 2))
                i += 2
                continue
            raise NoProbe("its LIMIT is not a plain number")
        elif depth == 0 and tok.is_word("FETCH"):
            words_ = toks[i:i + 5]
            if len(words_) == 5 and words_[1].is_word("FIRST", "NEXT") and words_[2].kind == NUMBER \
                    and words_[2].value.isdigit() and words_[3].is_word("ROW", "ROWS") and words_[4].is_word("ONLY"):
                limit = int(words_[2].value)
                cut.append((i, i + 5))
                i += 5
                continue
            raise NoProbe("its FETCH clause is not FETCH FIRST n ROWS ONLY")
        i += 1
    if not locking:
        raise NoProbe("no SKIP LOCKED clause")
    pieces, pos = [], 0
    for a, b in cut:
        pieces.append(sql[pos:toks[a].start])
        pos = toks[b - 1].end
    pieces.append(sql[pos:toks[-1].end])
    probe = " ".join(p.strip() for p in pieces if p.strip())
    table = next((toks[k + 1].value.lower() if toks[k + 1].kind == WORD else toks[k + 1].value
                  for k in range(n - 1) if toks[k].is_word("FROM") and toks[k + 1].kind in (WORD, NAME)), None)
    return probe, limit, table


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
