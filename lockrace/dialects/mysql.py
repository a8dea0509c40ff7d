"""MySQL 8 and 9 (lockrace's flavor "mysql8"): max_execution_time in ms, NOWAIT for
row locks only (3572), performance_schema.data_lock_waits."""

from __future__ import annotations

from ..registry import Flavor
from .mysql_family import MySQLFamilyDialect


class MySQLDialect(MySQLFamilyDialect):
    name = Flavor.MYSQL8
    label = "MySQL"
    # the ranges MySQL cuts a session value to (its reference manual): seconds, max_execution_time in ms
    budget_ranges = {"innodb_lock_wait_timeout": (1, 1_073_741_824), "lock_wait_timeout": (1, 31_536_000),
                     "max_execution_time": (0, 4_294_967_295)}
    statement_limit = "max_execution_time"  # in ms
    statement_limit_ms = 1.0
    lock_views_in_performance_schema = True  # data_lock_waits, metadata_locks: no cache in front
    first_poll_s = 0.001


MYSQL = MySQLDialect()
