"""MariaDB (and MariaDB Galera): max_statement_time, WAIT n, NOWAIT that also bounds
metadata-lock waits, the InnoDB lock views of information_schema."""

from __future__ import annotations

from ..registry import Flavor
from .mysql_family import MySQLFamilyDialect


class MariaDBDialect(MySQLFamilyDialect):
    name = Flavor.MARIADB
    label = "MariaDB"
    # the ranges MariaDB cuts a session value to (its reference manual), in seconds
    budget_ranges = {"innodb_lock_wait_timeout": (0, 100_000_000), "lock_wait_timeout": (0, 31_536_000),
                     "max_statement_time": (0, 31_536_000)}
    statement_limit = "max_statement_time"  # in seconds, fractions allowed
    statement_limit_ms = 1000.0
    lock_views_cached = True  # INNODB_LOCK_WAITS: a snapshot refreshed after 100 ms unread
    # read InnoDB's lock views once, 5 ms after a statement was sent (it waits by then), not
    # as it starts: a read then finds nothing and, InnoDB refreshing them only after 100 ms
    # without a read, would hide the wait for 100 ms
    first_poll_s = 0.005
    nowait_bounds_table_locks = True
    processlist_ms = "TIME_MS"  # MariaDB's PROCESSLIST has it to the microsecond
    statement_wait_n = True  # WAIT n, in seconds (it keeps only the whole seconds)  # NOWAIT / WAIT 0 set lock_wait_timeout 0 for the statement


MARIADB = MariaDBDialect()
