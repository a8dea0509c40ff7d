"""What the engine tells its consumers (the app, the CLI, tests).

Every event is a small frozen dataclass.  Times are ``time.perf_counter_ns()``
readings taken by the engine; ``elapsed_ns`` is measured around the driver
call itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ROW_LIMIT = 200
"""Rows of a result set the backends keep; the rest are streamed past and only counted
(a result is never held whole: ``SELECT generate_series(1, 2000000)`` keeps 200 rows)."""


# A hot standby's startup process replays the primary's WAL and holds the
# ACCESS EXCLUSIVE locks the primary's transactions took; a standby reader
# waiting for one is "blocked by" it.  Scenarios write it as ``blocked-by: replay``.
REPLAY_PROCESS = "the startup process (replay)"
REPLAY_ALIAS = "replay"
# A MariaDB metadata-lock wait whose holder nobody can name: the server lists granted
# metadata locks only through the METADATA_LOCK_INFO plugin.
NO_MDL_INFO = "an unnamed holder (the server does not tell who holds it: no METADATA_LOCK_INFO plugin)"
# ... and cancels a standby query that holds up replay for longer than this.
STANDBY_BUDGET = "max_standby_streaming_delay"


@dataclass(frozen=True)
class LockInfo:
    """What a blocked statement waits for, as the server reports it."""

    kind: str  # relation, tuple, transactionid, advisory, record, table, metadata, ...
    mode: str = ""  # AccessExclusiveLock, ShareLock, X, X,REC_NOT_GAP, ...
    relation: str = ""  # accounts
    detail: str = ""  # id=1 (a row by its key), 0,1 (by its ctid), index PRIMARY key 1, ...

    def describe(self) -> str:
        what = self.relation or self.kind
        if self.kind in ("tuple", "record", "transactionid") and self.relation:
            what = f"{self.relation} row"
        parts = [what]
        if self.kind == "tuple" and "=" in self.detail:  # named by its key: accounts id=1
            parts = [self.relation or "row", self.detail]
        elif self.detail:
            parts.append(f"({self.detail})")
        if self.kind == "replication":  # clusters: waiting for this node to apply or replay
            parts = [self.detail or "replication"]
        elif self.kind == "metadata":
            parts = [f"metadata lock on {self.relation or 'a table'}"]
        elif self.kind == "relation":
            parts = [f"table {self.relation}"]
        elif self.kind == "advisory":
            parts = [f"advisory lock {self.detail}".strip()]
        if self.mode:
            parts.append(self.mode)
        return " ".join(parts)


@dataclass(frozen=True)
class Budget:
    """A wait budget in force for a statement: name and milliseconds (0 = none)."""

    name: str
    ms: float


@dataclass
class StatementResult:
    """Everything a finished statement produced."""

    outcome: str  # see lockrace.scenario.model.OUTCOMES
    columns: list[str] = field(default_factory=list)
    rows: list[tuple] = field(default_factory=list)  # at most ROW_LIMIT: the first rows
    has_rows: bool = False
    row_count: int = -1  # rows the statement returned in all (-1: len(rows))
    tag: str = ""  # PG: "UPDATE 1"; MySQL: "Query OK, 1 row affected"
    rowcount: int = -1
    code: str = ""  # SQLSTATE or MySQL errno
    sqlstate: str = ""  # MySQL's SQLSTATE beside its errno (HY000, 40001, ...)
    message: str = ""  # the server's primary message, exactly
    detail: str = ""
    severity: str = ""  # PG: ERROR / FATAL
    elapsed_ns: int = 0
    started_ns: int = 0  # perf_counter_ns() just before the driver call (0: unknown)
    waited_ns: int = 0  # time the server reported the statement blocked
    blocked_by: tuple[str, ...] = ()  # sessions that blocked it (last report)
    blockers_seen: tuple[str, ...] = ()  # every blocker the server reported for it, in order
    locks_seen: tuple[LockInfo, ...] = ()  # every lock it was reported waiting on
    lock: LockInfo | None = None
    held_by: tuple[str, ...] | None = None
    """A refusal (NOWAIT): who held the lock, as the server's lock views said right after it
    (() they showed no holder any more; None they cannot tell)."""
    explained: tuple[str, ...] = ()
    """Lines lockrace adds to explain the answer in plain words: a deadlock's cycle as the server
    told it (sessions by name, then ``cycle: A → B → A``), a COMMIT that rolled back, NOWAIT
    behind a table lock (see core/deadlock.py, core/explain.py)."""
    cycle: tuple[str, ...] = ()
    """A deadlock victim: the sessions of the cycle, the victim first, as the server reported it."""
    skipped_rows: int = 0
    skipped_from: tuple[str, ...] = ()
    skip_unknown: str = ""
    """A SKIP LOCKED read whose passed-over rows were not counted: why (one phrase)."""
    budget: Budget | None = None
    node: str = ""  # cluster races: the node the statement ran on
    conflict: str = ""  # certification_conflict: "certification failure" or "brute-force abort"
    notices: list[str] = field(default_factory=list)
    result_sets: list["StatementResult"] = field(default_factory=list)
    """For multi-statement texts: every result set, in order (this object is the last)."""

    @classmethod
    def server_error(cls, outcome: str, code: str, sqlstate: str, message: str, started_ns: int, elapsed_ns: int,
                     result_sets: list | None = None) -> "StatementResult":
        """An error the server answered with, made without the generated __init__ (its
        27 fields): it lies on a refusal's or a lock wait timeout's way to the caller,
        where, after a quiet spell, each line of Python costs several times its usual
        time (see backends/mysql_answer.py).  The fields not given keep their defaults."""
        result = object.__new__(cls)
        result.outcome, result.code, result.sqlstate, result.message = outcome, code, sqlstate, message
        result.started_ns, result.elapsed_ns = started_ns, elapsed_ns
        result.columns, result.rows, result.notices = [], [], []
        result.result_sets = [] if result_sets is None else result_sets
        return result

    @property
    def succeeded(self) -> list["StatementResult"]:
        """The results of the statements of its text that succeeded, in order (the
        server runs nothing after one that fails)."""
        if self.result_sets:
            return self.result_sets
        return [] if self.code else [self]

    @property
    def total_rows(self) -> int:
        """How many rows the statement returned, including those not kept."""
        return self.row_count if self.row_count >= 0 else len(self.rows)

    @property
    def truncated(self) -> bool:
        return self.has_rows and self.total_rows > len(self.rows)

    @property
    def elapsed_ms(self) -> float:
        return self.elapsed_ns / 1e6

    @property
    def waited_ms(self) -> float:
        return self.waited_ns / 1e6

    @property
    def failed(self) -> bool:
        return self.outcome not in ("ok", "skipped")


@dataclass(frozen=True)
class Event:
    session: str
    t_ns: int
    node: str = field(default="", kw_only=True)
    """Cluster races: the node the session sits on ("" on a single server)."""


@dataclass(frozen=True)
class StatementStarted(Event):
    stmt_id: int
    sql: str
    budget: Budget | None = None


@dataclass(frozen=True)
class StatementBlocked(Event):
    stmt_id: int
    blockers: tuple[str, ...]
    lock: LockInfo | None
    since_ns: int = 0  # statement start
    budget: Budget | None = None
    """The budget that bounds this wait, when the server's report changed it from the one
    the statement started with (MariaDB/MySQL: a metadata-lock wait is bounded by
    lock_wait_timeout, not innodb_lock_wait_timeout); None: the statement's."""


@dataclass(frozen=True)
class StatementUnblocked(Event):
    stmt_id: int


@dataclass(frozen=True)
class StatementFinished(Event):
    stmt_id: int
    sql: str
    result: StatementResult


@dataclass(frozen=True)
class StatementExplained(Event):
    """What lockrace learnt about a finished statement from a further question to the
    server, after its answer was out (``StatementFinished``): who holds the lock a
    refused statement wanted (``result.held_by``, set in the same result object), or
    a deadlock victim's cycle (``result.explained``, ``result.cycle``)."""

    stmt_id: int
    result: StatementResult


@dataclass(frozen=True)
class SessionState(Event):
    """Transaction state and budgets after a statement (or at connect)."""

    txn: str  # idle, in transaction, failed transaction, closed
    budgets: tuple[Budget, ...] = ()
    ident: int = 0  # backend pid / thread id


@dataclass(frozen=True)
class ServerNote(Event):
    """Something about the server or the race as a whole (session == "")."""

    text: str
    level: str = "info"
