"""One policy rehearsed on one freshly set-up sandbox, in plain threads.

Timeline (times since the rehearsal's origin): the bystanders start at 0; at
``LEAD_S`` the long transaction reads the table and holds it for --hold-ms;
``GAP_S`` after it holds the lock the migration starts under the policy; the
bystanders keep going for --duration after the migration started (and, if the
migration is still running then, until ``TAIL_S`` after it ended); retries
stop when --duration is over.  ``stop`` (from any thread) ends it at once:
every connection of the rehearsal is ended on the server by the control
connection, so no statement keeps waiting and no lock stays held.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from time import perf_counter_ns

from ..dialects import family_dialect
from .connections import Control, Failure, connect
from .migration import MigrationResult, MigrationRunner
from .policies import Policy
from .sqlfile import Statement
from .stats import Queue, Waits, queue, summarize
from .workload import Bystander, LongTransaction

LEAD_S = 0.5  # traffic before the long transaction starts (the unhindered baseline)
GAP_S = 0.1  # from the long transaction holding its lock to the migration's start
TAIL_S = 0.5  # traffic after the migration ended (the queue drains)
SAFETY_S = 120.0  # a migration still on the server this long after the hold and --duration are over is ended


@dataclass(frozen=True)
class Plan:
    engine: str
    clients: int
    duration_s: float
    hold_ms: int
    keys: int
    workload: list[str]
    table: str  # what the long transaction reads


@dataclass
class PolicyResult:
    policy: Policy
    statements: list[Statement]  # the migration as run (a variant rewritten)
    migration: MigrationResult
    waits: Waits
    queue: Queue
    starts_ns: list[int] = field(default_factory=list)
    waits_ns: list[int] = field(default_factory=list)
    hold_from_ns: int | None = None
    hold_until_ns: int | None = None
    end_ns: int = 0  # when the traffic stopped
    bystander_failures: dict[str, int] = field(default_factory=dict)
    lost: bool = False  # a connection was lost (the server went away)

    @property
    def remaining_ms(self) -> float | None:
        """How much of the long transaction's hold was left when the migration started."""
        if self.hold_until_ns is None or self.migration.start_ns is None:
            return None
        return max(0.0, (self.hold_until_ns - self.migration.start_ns) / 1e6)


class Rehearsal:
    def __init__(self, backend, plan: Plan, policy: Policy, stmts: list[Statement], rng: int | None = None):
        self.backend = backend
        self.plan = plan
        self.policy = policy
        self.stmts = stmts
        self.rng = rng
        self.stop_event = threading.Event()
        self.done = threading.Event()
        self.conns: list = []
        self.control: Control | None = None
        self.migration: MigrationRunner | None = None
        self.bystanders: list[Bystander] = []
        self.holder: LongTransaction | None = None
        self.origin_ns = 0
        self.phase = "connecting"
        self.result: PolicyResult | None = None
        self.error: BaseException | None = None
        self.cut_off = False  # the migration ran past SAFETY_S and was ended
        self._lock = threading.Lock()

    # ------------------------------------------------------------ from other threads

    def elapsed_s(self) -> float:
        return (perf_counter_ns() - self.origin_ns) / 1e9 if self.origin_ns else 0.0

    def planned_s(self) -> float:
        """How long it is planned to take (the progress bar's total)."""
        p = self.plan
        return LEAD_S + (GAP_S if p.hold_ms > 0 else 0.0) + p.duration_s

    def stop(self) -> None:
        """End it now, from any thread: the server ends every connection of the rehearsal."""
        self.stop_event.set()
        with self._lock:
            idents = [c.ident for c in self.conns]
            control = self.control
        if control is not None:
            control.end(idents)

    # ------------------------------------------------------------ the rehearsal's own thread

    def _cut_off(self, conn) -> None:
        self.cut_off = True
        if self.control is not None:
            self.control.end([conn.ident])

    def _open(self, app: str):
        conn = connect(self.backend, app)
        with self._lock:
            self.conns.append(conn)
        if self.stop_event.is_set():
            raise InterruptedError
        return conn

    def run(self) -> None:
        try:
            self.result = self._run()
        except InterruptedError:
            pass
        except BaseException as exc:  # told to the caller, which says it in one sentence
            self.error = exc
        finally:
            self._close()
            self.done.set()

    def _run(self) -> PolicyResult:
        p = self.plan
        self.control = Control.of(self.backend)
        clients = [self._open(f"rehearse-b{i + 1}") for i in range(p.clients)]
        holder_conn = self._open("rehearse-long") if p.hold_ms > 0 else None
        mig_conn = self._open("rehearse-migration")
        stop_traffic = threading.Event()
        self.origin_ns = perf_counter_ns()
        rng = self.rng
        self.bystanders = [Bystander(i, c, p.workload, p.keys, self.origin_ns, stop_traffic,
                                     None if rng is None else rng * 1000 + i) for i, c in enumerate(clients)]
        for b in self.bystanders:
            b.start()
        self.phase = "traffic"
        if self.stop_event.wait(LEAD_S):
            raise InterruptedError
        if holder_conn is not None:
            quote = family_dialect(p.engine).identifier_quote
            self.holder = LongTransaction(holder_conn, p.table, p.hold_ms, self.origin_ns, self.stop_event, quote)
            self.holder.start()
            self.holder.holding.wait(30)
            if self.holder.failure is not None:
                raise RehearsalError(f"the long transaction could not read {p.table}: {self.holder.failure.sentence()}")
            self.phase = "long transaction"
            if self.stop_event.wait(GAP_S):
                raise InterruptedError
        start = perf_counter_ns() - self.origin_ns
        retry_until = start + int(p.duration_s * 1e9)
        self.migration = MigrationRunner(mig_conn, p.engine, self.policy, self.stmts, self.origin_ns,
                                         self.stop_event, retry_until, rng)
        self.phase = "migration"
        cut = threading.Timer(p.hold_ms / 1000 + p.duration_s + SAFETY_S, self._cut_off, [mig_conn])
        cut.daemon = True
        cut.start()
        try:
            result = self.migration.run()
        finally:
            cut.cancel()
        if self.cut_off:
            result.outcome = "failed"
            result.reason = (f"it was still running {SAFETY_S:g} s after the hold and --duration were over, and "
                             "lockrace ended it")
        if self.stop_event.is_set():
            raise InterruptedError
        self.phase = "traffic"
        assert result.end_ns is not None  # MigrationRunner.run sets it on every way out
        until = max(retry_until, result.end_ns + int(TAIL_S * 1e9))
        wait_s = (until - (perf_counter_ns() - self.origin_ns)) / 1e9
        if wait_s > 0 and self.stop_event.wait(wait_s):
            raise InterruptedError
        stop_traffic.set()
        end_ns = perf_counter_ns() - self.origin_ns
        for b in self.bystanders:
            b.join(2.0)
        stuck = [b for b in self.bystanders if b.is_alive()]
        if stuck:  # waiting on something the traffic should never wait this long for
            self.control.end([b.conn.ident for b in stuck])
            for b in stuck:
                b.join(2.0)
        if self.holder is not None:
            self.holder.join(max(0.0, (p.hold_ms / 1000) - self.elapsed_s()) + 5)
        return self._result(result, end_ns)

    def _result(self, mig: MigrationResult, end_ns: int) -> PolicyResult:
        starts: list[int] = []
        waits: list[int] = []
        errors = 0
        failures: dict[str, int] = {}
        lost = False
        for b in self.bystanders:
            starts.extend(b.starts)
            waits.extend(b.waits)
            errors += b.errors
            lost = lost or b.lost
            for k, v in b.failures.items():
                failures[k] = failures.get(k, 0) + v
        order = sorted(range(len(starts)), key=starts.__getitem__)
        starts = [starts[i] for i in order]
        waits = [waits[i] for i in order]
        holder = self.holder
        return PolicyResult(
            policy=self.policy, statements=self.stmts, migration=mig,
            waits=summarize(starts, waits, errors, end_ns), queue=queue(starts, waits, mig.attempts),
            starts_ns=starts, waits_ns=waits,
            hold_from_ns=holder.held_from_ns if holder else None,
            hold_until_ns=holder.held_until_ns if holder else None,
            end_ns=end_ns, bystander_failures=failures, lost=lost)

    def _close(self) -> None:
        """Every connection closed; on a stop, first ended on the server (nothing waits, nothing is held)."""
        if self.stop_event.is_set() and self.control is not None:
            self.stop()
        for b in self.bystanders:
            b.join(1.0)
        with self._lock:
            conns, self.conns = self.conns, []
        for c in conns:
            c.close()
        if self.control is not None:
            self.control.close()


class RehearsalError(Exception):
    """The rehearsal could not be run as planned: one sentence."""


def run_alone(backend, stmts: list[Statement], engine: str) -> tuple[float, Failure | None]:
    """The migration alone on the freshly set-up sandbox, no traffic, no budget (blocking):
    how long it takes, or the server's error.  This is how a migration that cannot
    run at all (bad SQL, a missing column) is told before any traffic starts."""
    from .migration import units
    from .policies import Policy

    conn = connect(backend, "rehearse-check")
    try:
        # bounded: nothing else is on the sandbox, so only the statement's own work counts
        conn.run(backend.dialect.statement_limit_sql(120))
        plain = Policy("none")
        t0 = perf_counter_ns()
        for unit, in_txn in units(stmts, engine):
            runner = MigrationRunner(conn, engine, plain, unit, t0, threading.Event(), 0)
            failure = runner.run_once(unit, in_txn)
            if failure is not None:
                return 0.0, failure
        return (perf_counter_ns() - t0) / 1e6, None
    finally:
        conn.close()


def check_workload(backend, workload: list[str]) -> tuple[int, Failure] | None:
    """Each workload statement once, with key 1 (blocking): the first that fails, or None."""
    from .sqlfile import key_parts

    conn = connect(backend, "rehearse-check")
    try:
        for i, statement in enumerate(workload, 1):
            failure = conn.run("1".join(key_parts(statement)))
            if failure is not None:
                return i, failure
        return None
    finally:
        conn.close()
