"""What MariaDB and MySQL share: errnos, lock_wait_timeout / innodb_lock_wait_timeout,
SET STATEMENT, NOWAIT / WAIT n, XA, thread ids.  dialects/mariadb.py and
dialects/mysql.py say where they differ.

MySQL 8 codes come from MySQL's error reference:
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
refusal too: ``settle`` turns such a ``timed_out`` into ``refused`` once the
budget in force is known.  MariaDB Galera sends the same 1213 for a lost
certification or a brute-force abort (core/outcome.py ``galera_conflict``).
"""

from __future__ import annotations

import re

from ..core import prepared as prepared_mod
from ..core.events import Budget
from ..core.outcome import Outcome, asks_nowait, wait_seconds
from ..core.sqltext import MYSQL_SQL
from ..registry import Family
from .base import NOWAIT, Dialect

# client-side errors that mean the connection is gone (pymysql / libmysql CR_*)
CONNECTION_ERRORS = frozenset({2006, 2013, 2055, 2003, 2002, 4031, 1927, 1053})

_SET_STATEMENT = re.compile(r"^\s*SET\s+STATEMENT\s+(.*?)\s+FOR\s+(.*)$", re.IGNORECASE | re.DOTALL)
_ASSIGNMENT = re.compile(r"(\w+)\s*=\s*([0-9.]+)")
_DDL = re.compile(r"^\s*(ALTER|CREATE|DROP|TRUNCATE|RENAME|LOCK\s+TABLES?|OPTIMIZE|ANALYZE)\b", re.IGNORECASE)


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
    if errno in CONNECTION_ERRORS:
        return Outcome.CONNECTION_LOST
    return Outcome.ERROR


class MySQLFamilyDialect(Dialect):
    family = Family.MYSQL
    lexer = MYSQL_SQL
    ident_word = "thread"
    budget_names = ("innodb_lock_wait_timeout", "lock_wait_timeout", "max_statement_time", "max_execution_time")
    fractional_budgets = frozenset({"max_statement_time"})
    tracks_metadata_locks = True
    qualified_table_names = True
    xa_owner_finishes = True
    row_lock_setting = "innodb_lock_wait_timeout"
    row_lock_whole_seconds = True
    row_lock_budget_by_default = True  # innodb_lock_wait_timeout, 50 s unless configured
    bench_defaults = (1500, 1000)
    ddl_lock_setting = "lock_wait_timeout"
    ddl_lock_example = "lock_wait_timeout=1"
    ddl_lock_whole_seconds = True
    online_ddl = "instant"  # ALTER TABLE ... ALGORITHM=INSTANT
    identifier_quote = "`"
    table_options = " ENGINE=InnoDB"
    empty_result = "Empty set"
    migration_presets = ("strong_migrations",)
    default_policies = ("none", "lock_wait_timeout=1+retry", "strong_migrations")
    ddl_no_budget_s = 31_536_000  # lock_wait_timeout's largest value (one year): "no budget"

    # the setting that bounds one statement's run time, and how many ms one of its units is
    statement_limit = ""
    statement_limit_ms = 1.0
    # where the server says who waits for a row lock:
    #  - lock_views_cached: InnoDB's information_schema views (INNODB_LOCK_WAITS), a snapshot
    #    InnoDB refreshes only once nobody has read it for 100 ms (trx0i_s.cc)
    #  - lock_views_in_performance_schema: performance_schema.data_lock_waits and
    #    metadata_locks, read afresh on every query (when performance_schema is ON)
    lock_views_cached = False
    lock_views_in_performance_schema = False
    first_poll_s = 0.001  # how long after a send the monitor first looks for a wait
    processlist_ms = "TIME * 1000"  # how long a thread has been in its state, in ms (PROCESSLIST)

    def limit_clause(self, seconds: float) -> str:
        """``SET SESSION`` text that bounds each statement of a connection to ``seconds``."""
        value = seconds * 1000.0 / self.statement_limit_ms
        return f"{self.statement_limit} = {value:g}" if self.statement_limit_ms > 1 \
            else f"{self.statement_limit} = {int(value)}"

    def budgets_sql(self, scope: str = "") -> str:
        """The session's three wait budgets, in ``budget_names``' units (see ``budgets_from``);
        ``scope="global."``: what SET ... = DEFAULT gives a session."""
        return (f"SELECT @@{scope}innodb_lock_wait_timeout, @@{scope}lock_wait_timeout,"
                f" @@{scope}{self.statement_limit}")

    def budgets_from(self, row) -> tuple[Budget, ...]:
        """The answer of ``budgets_sql`` as budgets in ms."""
        ilwt, lwt, limit = row
        return (Budget("innodb_lock_wait_timeout", float(ilwt) * 1000), Budget("lock_wait_timeout", float(lwt) * 1000),
                Budget(self.statement_limit, float(limit) * self.statement_limit_ms))

    def error_text(self, code, message, severity=None, sqlstate=None):
        return f"ERROR {code} ({sqlstate or 'HY000'}): {message}" if code else f"ERROR: {message}"

    def set_sql(self, setting, ms, local=False):
        return f"SET SESSION {setting} = {ms / 1000:g}"

    def reset_sql(self, setting):
        return f"SET SESSION {setting} = DEFAULT"

    def ddl_budget_sql(self, ms, local=False):
        seconds = self.ddl_no_budget_s if ms is None else int(ms // 1000)
        return f"SET SESSION lock_wait_timeout = {seconds}"

    def statement_limit_sql(self, seconds):
        return f"SET SESSION {self.limit_clause(seconds)}"

    def classify(self, code, message, sql, connection_closed=False):
        if code is None or code == "":
            return Outcome.CONNECTION_LOST if connection_closed else Outcome.ERROR
        return classify_mysql(int(code), message, sql)

    def settle(self, outcome, code, budget):
        if outcome == Outcome.TIMED_OUT and code == "1205" and budget is not None and budget.ms == 0:
            # innodb_lock_wait_timeout = 0 (or lock_wait_timeout = 0): the server did not wait at all
            return Outcome.REFUSED, budget
        return outcome, budget

    def is_metadata_wait(self, sql: str) -> bool:
        return _DDL.match(sql) is not None

    def statement_budget(self, budgets: tuple[Budget, ...], sql: str, metadata: bool = False) -> Budget | None:
        """``SET STATEMENT var = n FOR ...`` overrides the session's value for that
        statement; NOWAIT and WAIT n are the statement's own; a metadata-lock wait
        (DDL, or any statement the server reported waiting on one: ``metadata``) is
        bounded by lock_wait_timeout, a row wait by innodb_lock_wait_timeout; either
        at 0 means no wait at all (a refusal), shown as ``name = 0``."""
        values = {b.name: b.ms for b in budgets}
        prefix = ""
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
            return NOWAIT
        wait = wait_seconds(sql)
        if wait is not None:
            text, seconds = wait
            label = f"WAIT {text}" if text == str(seconds) else f"WAIT {text} (read as {seconds})"
            return Budget(label, seconds * 1000.0)
        lock_budget = "lock_wait_timeout" if metadata or _DDL.match(sql) else "innodb_lock_wait_timeout"
        if values.get(lock_budget) == 0:  # no wait at all: the server refuses at once
            return Budget(f"{prefix}{lock_budget} = 0", 0.0)
        names = [lock_budget, "max_statement_time", "max_execution_time"]
        candidates = [Budget(prefix + n if prefix and m and re.search(rf"\b{n}\b", m.group(1), re.IGNORECASE) else n,
                             values[n]) for n in names if values.get(n, 0) > 0]
        return min(candidates, key=lambda b: b.ms) if candidates else None

    def rollback_prepared(self, gid: str) -> str:
        return f"XA ROLLBACK {gid}"

    def prepared_changes(self, sql, tags):
        return prepared_mod.xa_changes(sql, tags)
