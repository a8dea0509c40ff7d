"""Decide a statement's outcome class from what the server returned.

Pure functions, no I/O: the classifier looks only at the error the server
sent (SQLSTATE or MySQL errno, and message) and at what the statement asked
for (NOWAIT, WAIT n, SKIP LOCKED).

MySQL 8 codes come from MySQL's error reference, since no MySQL 8 server can be
installed where lockrace is developed:
  3572 ER_LOCK_NOWAIT        "Statement aborted because lock(s) could not be
                              acquired immediately and NOWAIT is set."
  1205 ER_LOCK_WAIT_TIMEOUT  "Lock wait timeout exceeded; try restarting transaction"
  1213 ER_LOCK_DEADLOCK      "Deadlock found when trying to get lock; try
                              restarting transaction"
  3024 ER_QUERY_TIMEOUT      "Query execution was interrupted, maximum statement
                              execution time exceeded"
  1317 ER_QUERY_INTERRUPTED  "Query execution was interrupted"
MariaDB answers NOWAIT / WAIT 0 with 1205 at once (and WAIT 0.5 too: it keeps
only the whole seconds), and max_statement_time with 1969 ER_STATEMENT_TIMEOUT.
1205 under innodb_lock_wait_timeout = 0 (or lock_wait_timeout = 0) is a
refusal too: the engine turns such a ``timed_out`` into ``refused`` once it
knows the budget in force (engine/race.py, Session.budget_for).

Cluster outcomes:
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

# client-side errors that mean the connection is gone (pymysql / libmysql CR_*)
MYSQL_CONNECTION_ERRORS = {2006, 2013, 2055, 2003, 2002, 4031, 1927, 1053}
PG_CONNECTION_STATES = ("08", "57P01", "57P02", "57P03", "25P03")


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


def classify_postgres(sqlstate: str | None, message: str, sql: str, connection_closed: bool = False) -> Outcome:
    if not sqlstate:
        return Outcome.CONNECTION_LOST if connection_closed else Outcome.ERROR
    if sqlstate == "55P03":
        if "lock timeout" in message:
            return Outcome.TIMED_OUT
        return Outcome.REFUSED
    if sqlstate == "40P01":
        return Outcome.DEADLOCK
    if "conflict with recovery" in message:  # 40001 (57P04 when the database was dropped)
        return Outcome.RECOVERY_CONFLICT
    if sqlstate == "57014":
        if "statement timeout" in message:
            return Outcome.STATEMENT_TIMEOUT
        if "user request" in message:
            return Outcome.CANCELLED
        return Outcome.CANCELLED
    if sqlstate.startswith(PG_CONNECTION_STATES) or connection_closed:
        return Outcome.CONNECTION_LOST
    return Outcome.ERROR


def classify_mysql(errno: int | None, message: str, sql: str, waited_ns: int = 0) -> Outcome:
    if errno is None:
        return Outcome.ERROR
    if errno == 3572:
        return Outcome.REFUSED
    if errno == 1205:
        wait = wait_seconds(sql)
        if asks_nowait(sql) or (wait is not None and wait[1] == 0):
            return Outcome.REFUSED
        return Outcome.TIMED_OUT
    if errno == 1213:
        return Outcome.DEADLOCK
    if errno in (3024, 1969):
        return Outcome.STATEMENT_TIMEOUT
    if errno == 1317:
        return Outcome.CANCELLED
    if errno in MYSQL_CONNECTION_ERRORS:
        return Outcome.CONNECTION_LOST
    return Outcome.ERROR


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
