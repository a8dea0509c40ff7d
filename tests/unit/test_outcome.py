"""The outcome classifier, on error codes and messages as servers send them.

PostgreSQL and MariaDB codes are also exercised live by the scenario tests.
MySQL 8 codes (3572 ER_LOCK_NOWAIT, 3024 ER_QUERY_TIMEOUT, 1317) are recorded
from MySQL's error reference: no MySQL 8 server can be installed where
lockrace is developed, so these cases are checked here only.
"""

import pytest

from lockrace.core.outcome import asks_nowait, asks_skip_locked, wait_seconds, with_skip
from lockrace.dialects.mysql_family import classify_mysql
from lockrace.dialects.postgres import classify_postgres


@pytest.mark.parametrize("sqlstate,message,sql,want", [
    ("55P03", 'could not obtain lock on row in relation "accounts"', "SELECT 1 FOR UPDATE NOWAIT", "refused"),
    ("55P03", 'could not obtain lock on relation "accounts"', "LOCK TABLE accounts NOWAIT", "refused"),
    ("55P03", "canceling statement due to lock timeout", "UPDATE accounts SET x = 1", "timed_out"),
    ("40P01", "deadlock detected", "UPDATE t SET x = 1", "deadlock"),
    ("57014", "canceling statement due to statement timeout", "SELECT pg_sleep(1)", "statement_timeout"),
    ("57014", "canceling statement due to user request", "SELECT pg_sleep(1)", "cancelled"),
    ("25P03", "terminating connection due to idle-in-transaction timeout", "SELECT 1", "connection_lost"),
    ("57P01", "terminating connection due to administrator command", "SELECT 1", "connection_lost"),
    ("42601", 'syntax error at or near "SELCT"', "SELCT 1", "error"),
    (None, "server closed the connection unexpectedly", "SELECT 1", "error"),
])
def test_postgres(sqlstate, message, sql, want):
    assert classify_postgres(sqlstate, message, sql) == want


def test_postgres_closed_connection_without_sqlstate():
    assert classify_postgres(None, "the connection is lost", "SELECT 1", connection_closed=True) == "connection_lost"


@pytest.mark.parametrize("errno,sql,want", [
    (3572, "SELECT id FROM accounts WHERE id = 1 FOR UPDATE NOWAIT", "refused"),  # MySQL 8 (documented)
    (1205, "SELECT id FROM accounts WHERE id = 1 FOR UPDATE NOWAIT", "refused"),  # MariaDB NOWAIT
    (1205, "SELECT id FROM accounts WHERE id = 1 FOR UPDATE WAIT 0", "refused"),  # MariaDB WAIT 0
    (1205, "SELECT id FROM accounts WHERE id = 1 FOR UPDATE WAIT 1", "timed_out"),
    (1205, "UPDATE accounts SET balance = 1 WHERE id = 1", "timed_out"),
    (1213, "UPDATE accounts SET balance = 1 WHERE id = 1", "deadlock"),
    (3024, "SELECT SLEEP(2)", "statement_timeout"),  # MySQL 8 max_execution_time (documented)
    (1969, "SELECT SLEEP(2)", "statement_timeout"),  # MariaDB max_statement_time
    (1317, "SELECT SLEEP(2)", "cancelled"),  # KILL QUERY
    (2013, "SELECT 1", "connection_lost"),
    (1064, "SELCT 1", "error"),
])
def test_mysql(errno, sql, want):
    assert classify_mysql(errno, "message", sql) == want


def test_nowait_inside_a_string_literal_is_not_a_clause():
    assert not asks_nowait("SELECT 'NOWAIT' FROM t")
    assert asks_nowait("select 1 from t for update nowait")


def test_wait_clause_and_skip_locked():
    assert wait_seconds("SELECT 1 FROM t FOR UPDATE WAIT 0.5") == ("0.5", 0)  # MariaDB keeps whole seconds
    assert wait_seconds("SELECT 1 FROM t FOR UPDATE WAIT 2") == ("2", 2)
    assert wait_seconds("SELECT 1") is None
    assert asks_skip_locked("SELECT * FROM jobs FOR UPDATE SKIP   LOCKED")
    assert with_skip("ok", "SELECT * FROM jobs FOR UPDATE SKIP LOCKED", 2) == "skipped"
    assert with_skip("ok", "SELECT * FROM jobs FOR UPDATE SKIP LOCKED", 0) == "ok"
    assert with_skip("ok", "SELECT * FROM jobs FOR UPDATE", 2) == "ok"


def test_a_server_error_made_the_short_way_equals_the_usual_one():
    """StatementResult.server_error (the refusal's short way to its caller) gives what
    the generated constructor gives: every other field at its default, its own lists."""
    from lockrace.core.events import StatementResult

    short = StatementResult.server_error("timed_out", "1205", "HY000", "Lock wait timeout exceeded", 10, 5)
    usual = StatementResult("timed_out", code="1205", sqlstate="HY000", message="Lock wait timeout exceeded",
                            started_ns=10, elapsed_ns=5)
    assert short == usual
    assert repr(short) == repr(usual)
    other = StatementResult.server_error("refused", "1205", "HY000", "x", 1, 1)
    short.notices.append("n")
    assert other.notices == [] and usual.notices == []
    assert short.rows is not other.rows and short.result_sets is not other.result_sets
