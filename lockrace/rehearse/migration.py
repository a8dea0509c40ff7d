"""The migration under a policy: attempts, each with the policy's lock budget,
retried after a lock timeout with backoff and jitter, never past the policy.

Units: on PostgreSQL the whole migration is one transaction per attempt (BEGIN,
SET LOCAL lock_timeout, the statements, COMMIT; a timed-out attempt rolls back
everything), unless a statement cannot run in a transaction block
(CONCURRENTLY, VACUUM): then each statement is its own unit with a session
lock_timeout.  On MySQL/MariaDB DDL commits by itself, so each statement is
its own unit with a session lock_wait_timeout.  Attempts are counted across
units.  An error that is not a lock timeout ends the migration as failed at
once: it is reported, not retried.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field
from time import perf_counter_ns

from ..dialects import family_dialect
from .connections import Failure
from .policies import Policy
from .sqlfile import Statement, transaction_safe


@dataclass(frozen=True)
class Attempt:
    number: int  # 1-based, across units
    start_ns: int  # since the rehearsal's origin
    end_ns: int
    outcome: str  # "landed" | "lock_timeout" | "error"
    message: str = ""

    @property
    def ms(self) -> float:
        return (self.end_ns - self.start_ns) / 1e6


@dataclass
class MigrationResult:
    outcome: str = "failed"  # "done" | "failed"
    attempts: list[Attempt] = field(default_factory=list)
    start_ns: int | None = None
    end_ns: int | None = None
    reason: str = ""  # why it failed, one clause
    steps: int = 1  # units attempted one after another (statements outside a transaction)

    @property
    def ms(self) -> float:
        if self.start_ns is None or self.end_ns is None:
            return 0.0
        return (self.end_ns - self.start_ns) / 1e6


def units(stmts: list[Statement], engine: str) -> list[tuple[list[Statement], bool]]:
    """The migration cut into what one attempt runs: (statements, in one transaction)."""
    if family_dialect(engine).transactional_ddl and transaction_safe(stmts):
        return [(stmts, True)]
    return [([s], False) for s in stmts]


class MigrationRunner:
    def __init__(self, conn, engine: str, policy: Policy, stmts: list[Statement], origin_ns: int,
                 stop: threading.Event, retry_until_ns: int, rng: int | None = None):
        self.conn = conn
        self.engine = engine
        self.policy = policy
        self.stmts = stmts
        self.origin_ns = origin_ns
        self.stop_event = stop
        self.retry_until_ns = retry_until_ns  # since the origin: no new attempt starts after this
        self.rnd = random.Random(rng)
        self.result = MigrationResult()
        self.attempting = False  # an attempt is on the server now (progress display)

    def _now(self) -> int:
        return perf_counter_ns() - self.origin_ns

    def run(self) -> MigrationResult:
        res = self.result
        res.start_ns = self._now()
        plan = units(self.stmts, self.engine)
        res.steps = len(plan)
        try:
            for stmts, in_txn in plan:
                if not self._unit(stmts, in_txn):
                    return res
            res.outcome = "done"
            return res
        finally:
            res.end_ns = self._now()
            self.attempting = False

    def run_once(self, stmts: list[Statement], in_txn: bool) -> Failure | None:
        run = self.conn.run
        if in_txn:
            failure = run("BEGIN") or run(self.policy.budget_sql(self.engine, local=True))
            if failure is None:
                for s in stmts:
                    failure = run(s.text)
                    if failure is not None:
                        break
            if failure is None:
                failure = run("COMMIT")
                return failure
            if not failure.lost:
                run("ROLLBACK")
            return failure
        failure = run(self.policy.budget_sql(self.engine))
        if failure is None:
            failure = run(stmts[0].text)
        return failure

    def _unit(self, stmts: list[Statement], in_txn: bool) -> bool:
        """Attempts of one unit until it lands; False: the migration failed."""
        res, policy = self.result, self.policy
        tries = 0
        while True:
            tries += 1
            number = len(res.attempts) + 1
            self.attempting = True
            start = self._now()
            failure = self.run_once(stmts, in_txn)
            end = self._now()
            self.attempting = False
            if failure is None:
                res.attempts.append(Attempt(number, start, end, "landed"))
                return True
            if self.stop_event.is_set():
                res.attempts.append(Attempt(number, start, end, "error", "stopped"))
                res.reason = "the rehearsal was stopped"
                return False
            if not failure.lock_timeout:
                res.attempts.append(Attempt(number, start, end, "error", failure.sentence()))
                res.reason = failure.sentence()
                return False
            res.attempts.append(Attempt(number, start, end, "lock_timeout", failure.sentence()))
            if policy.attempts is not None and tries >= policy.attempts:
                res.reason = (f"its lock budget ran out on {'every one' if tries > 1 else 'its only attempt'}"
                              + (f" of {tries} attempts" if tries > 1 else "") + ", as the policy allows no more")
                return False
            delay_ms = policy.backoff.delay_ms(tries, self.rnd) if policy.backoff else 0.0
            if self._now() + delay_ms * 1e6 > self.retry_until_ns:
                res.reason = f"it was still retrying (attempt {tries}) when the rehearsal's --duration was over"
                return False
            if self.stop_event.wait(delay_ms / 1000):
                res.reason = "the rehearsal was stopped"
                return False
