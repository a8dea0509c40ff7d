"""PostgreSQL: SQLSTATEs, lock_timeout / statement_timeout, PREPARE TRANSACTION, pids.

55P03 lock_not_available is both NOWAIT's refusal ("could not obtain lock on
row ...") and lock_timeout's end ("canceling statement due to lock timeout");
the message tells them apart.  57014 query_canceled is statement_timeout or a
cancel; 40P01 a deadlock; 40001 "conflict with recovery" a hot standby ending a
query that held up replay.
"""

from __future__ import annotations

import re

from ..core import prepared as prepared_mod
from ..core.events import Budget
from ..core.outcome import Outcome, asks_nowait
from ..core.sqltext import POSTGRES_SQL
from ..registry import Family, Flavor
from .base import NOWAIT, Dialect

CONNECTION_STATES = ("08", "57P01", "57P02", "57P03", "25P03")

_LOCK_TABLE = re.compile(r"^\s*LOCK\b", re.IGNORECASE)


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
        return Outcome.CANCELLED  # a cancel by user request, or lockrace's own
    if sqlstate.startswith(CONNECTION_STATES) or connection_closed:
        return Outcome.CONNECTION_LOST
    return Outcome.ERROR


class PostgresDialect(Dialect):
    name = Flavor.POSTGRES
    family = Family.POSTGRES
    label = "PostgreSQL"
    lexer = POSTGRES_SQL
    ident_word = "pid"
    budget_names = ("lock_timeout", "statement_timeout", "deadlock_timeout", "idle_in_transaction_session_timeout")
    transactional_settings = True
    deadlock_in_detail = True
    monitor_sees_own_changes = False  # a transaction's own changes are seen only from its connection
    # lock_not_available, query_canceled, deadlock_detected: outside a transaction the session is idle again
    lock_error_codes = frozenset({"55P03", "57014", "40P01"})
    row_lock_setting = "lock_timeout"
    ddl_lock_setting = "lock_timeout"
    ddl_lock_example = "lock_timeout=100ms"
    online_ddl = "concurrently"  # CREATE/DROP INDEX CONCURRENTLY, REINDEX CONCURRENTLY
    transactional_ddl = True
    migration_presets = ("strong_migrations", "pgroll")
    default_policies = ("none", "lock_timeout=100ms+retry", "strong_migrations", "pgroll")

    def error_text(self, code, message, severity=None, sqlstate=None):
        return f"{severity or 'ERROR'}: {code}: {message}" if code else f"ERROR: {message}"

    def set_sql(self, setting, ms, local=False):
        return f"SET {'LOCAL ' if local else ''}{setting} = '{ms:g}ms'"

    def reset_sql(self, setting):
        return f"RESET {setting}"

    def ddl_budget_sql(self, ms, local=False):
        value = "0" if ms is None else f"'{ms:g}ms'"
        return f"SET {'LOCAL ' if local else ''}lock_timeout = {value}"

    def statement_limit_sql(self, seconds):
        return f"SET statement_timeout = '{seconds:g}s'"

    def classify(self, code, message, sql, connection_closed=False):
        return classify_postgres(str(code) if code else None, message, sql, connection_closed)

    def settle(self, outcome, code, budget):
        if outcome == Outcome.REFUSED and code == "55P03" and budget is not None and budget.ms != 0:
            # FOR UPDATE/SHARE NOWAIT: the table lock could have waited up to lock_timeout,
            # but a refusal ("could not obtain lock on row") is NOWAIT's
            return outcome, NOWAIT
        return outcome, budget

    def statement_budget(self, budgets: tuple[Budget, ...], sql: str, metadata: bool = False) -> Budget | None:
        """LOCK ... NOWAIT refuses the table lock at once; otherwise the smaller of
        lock_timeout and statement_timeout, when set (0 is off)."""
        if _LOCK_TABLE.match(sql) and asks_nowait(sql):
            return NOWAIT
        values = {b.name: b.ms for b in budgets}
        candidates = [Budget(n, values[n]) for n in ("lock_timeout", "statement_timeout") if values.get(n, 0) > 0]
        return min(candidates, key=lambda b: b.ms) if candidates else None

    def rollback_prepared(self, gid: str) -> str:
        return f"ROLLBACK PREPARED {gid}"

    def prepared_changes(self, sql, tags):
        return prepared_mod.pg_changes(sql, tags)


POSTGRES = PostgresDialect()
