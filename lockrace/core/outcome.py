"""What a statement asked for, read from its text, and what lockrace adds to the
server's outcome class.

Pure functions, no I/O.  Which error code means which outcome is each server's
own: see lockrace/dialects (``Dialect.classify``, ``Dialect.settle``).  Here:
NOWAIT, MariaDB's ``WAIT n``, SKIP LOCKED, and the cluster outcomes that need
more than the error:

  certification_conflict  MariaDB Galera sends the same 1213 for a transaction
                          that lost replication certification (at COMMIT) or
                          was brute-force aborted by a replicated write as for
                          an InnoDB deadlock.  The message cannot tell them
                          apart; the node's own counters can
                          (wsrep_local_cert_failures, wsrep_local_bf_aborts):
                          see ``galera_conflict``.
  recovery_conflict       PostgreSQL hot standby: 40001 "canceling statement
                          due to conflict with recovery" (or "terminating
                          connection due to conflict with recovery").
"""

from __future__ import annotations

import re
from enum import StrEnum


class Outcome(StrEnum):
    """How a statement ended.  A StrEnum: each member equals its string, so
    scenario files and JSON output read and write the same words."""

    OK = "ok"
    TIMED_OUT = "timed_out"
    REFUSED = "refused"
    SKIPPED = "skipped"
    DEADLOCK = "deadlock"
    STATEMENT_TIMEOUT = "statement_timeout"
    CANCELLED = "cancelled"
    ERROR = "error"
    CONNECTION_LOST = "connection_lost"
    # cluster outcomes
    CERTIFICATION_CONFLICT = "certification_conflict"  # Galera: 1213 from replication
    RECOVERY_CONFLICT = "recovery_conflict"  # PostgreSQL hot standby: 40001 "... due to conflict with recovery"


_NOWAIT_RE = re.compile(r"\bNOWAIT\b", re.IGNORECASE)
_SKIP_RE = re.compile(r"\bSKIP\s+LOCKED\b", re.IGNORECASE)


def asks_nowait(sql: str) -> bool:
    return bool(_NOWAIT_RE.search(_strip_literals(sql)))


_WAIT_ANY_RE = re.compile(r"\bWAIT\s+(\d*)(\.\d*)?([eE][-+]?\d+)?(?![\w.])", re.IGNORECASE)


def wait_seconds(sql: str) -> tuple[str, int] | None:
    """MariaDB ``WAIT n``: the number as written and the whole seconds the
    server really waits.  MariaDB 10.11 keeps only the leading digits
    (measured: WAIT 1.9 waits 1 s, WAIT 0.5 and WAIT .5 refuse at once like
    WAIT 0, WAIT 5e-1 waits 5 s)."""
    for m in _WAIT_ANY_RE.finditer(_strip_literals(sql)):
        digits, frac, exp = m.group(1), m.group(2) or "", m.group(3) or ""
        if digits or (frac and len(frac) > 1):
            return digits + frac + exp, int(digits or 0)
    return None


def asks_skip_locked(sql: str) -> bool:
    return bool(_SKIP_RE.search(_strip_literals(sql)))


def _strip_literals(sql: str) -> str:
    sql = re.sub(r"'(?:[^']|'')*'", "''", sql)
    return re.sub(r"--[^\n]*", "", sql)


GALERA_COUNTERS = ("wsrep_local_cert_failures", "wsrep_local_bf_aborts")


def galera_conflict(errno: int | None, before: dict[str, int], after: dict[str, int]) -> str | None:
    """Why a Galera node answered 1213, from its counters read before and after.

    ``certification failure`` when wsrep_local_cert_failures grew (the
    transaction lost certification at COMMIT), ``brute-force abort`` when only
    wsrep_local_bf_aborts grew (a replicated write aborted it); None when
    neither moved: an ordinary InnoDB deadlock.
    """
    if errno != 1213:
        return None
    grew = {k: after.get(k, 0) - before.get(k, 0) for k in GALERA_COUNTERS}
    if grew["wsrep_local_cert_failures"] > 0:
        return "certification failure"
    if grew["wsrep_local_bf_aborts"] > 0:
        return "brute-force abort"
    return None


def with_skip(outcome: str, sql: str, skipped_rows: int) -> str:
    """An ok SKIP LOCKED read that passed over locked rows is ``skipped``."""
    if outcome == Outcome.OK and skipped_rows > 0 and asks_skip_locked(sql):
        return Outcome.SKIPPED
    return outcome
