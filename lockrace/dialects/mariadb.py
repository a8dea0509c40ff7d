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
    nowait_bounds_table_locks = True  # NOWAIT / WAIT 0 set lock_wait_timeout 0 for the statement


MARIADB = MariaDBDialect()
