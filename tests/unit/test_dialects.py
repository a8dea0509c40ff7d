"""Each dialect on its own, no server: what its error codes mean, how a statement's
budget is read, what it rolls prepared transactions back with, what it calls a
session, and its lock-view SQL."""

from __future__ import annotations

import pytest

from lockrace.core.events import Budget
from lockrace.dialects import (DIALECTS, MARIADB, MYSQL, MYSQL_FAMILY, NOWAIT, POSTGRES, Dialect, dialect_for,
                               family_dialect, mysql_dialect_of)

ROW = "SELECT id FROM accounts WHERE id = 1 FOR UPDATE"


def test_lookup_by_flavor():
    assert dialect_for("postgres") is POSTGRES
    assert dialect_for("mariadb") is MARIADB
    assert dialect_for("mysql8") is MYSQL
    assert set(DIALECTS) == {"postgres", "mariadb", "mysql8"}
    assert all(isinstance(d, Dialect) for d in DIALECTS.values())
    with pytest.raises(ValueError, match="no dialect for flavor 'oracle'"):
        dialect_for("oracle")


def test_families_lexers_and_words():
    assert (POSTGRES.family, MARIADB.family, MYSQL.family) == ("postgres", "mysql", "mysql")
    assert (POSTGRES.lexer, MARIADB.lexer, MYSQL.lexer) == ("postgres", "mysql", "mysql")
    assert (POSTGRES.label, MARIADB.label, MYSQL.label) == ("PostgreSQL", "MariaDB", "MySQL")
    assert POSTGRES.session_ident(4242) == "pid 4242"
    assert MARIADB.session_ident(17) == "thread 17" == MYSQL.session_ident(17)
    # the lexer each reads text with: '#' starts a comment only on MariaDB/MySQL
    assert len(POSTGRES.statements("SELECT 1 # 2")[0]) == 4
    assert len(MYSQL.statements("SELECT 1 # 2")[0]) == 2


# ------------------------------------------------------------ classification

@pytest.mark.parametrize("code,message,sql,want", [
    ("55P03", 'could not obtain lock on row in relation "accounts"', ROW + " NOWAIT", "refused"),
    ("55P03", "canceling statement due to lock timeout", "UPDATE accounts SET x = 1", "timed_out"),
    ("57014", "canceling statement due to statement timeout", "SELECT pg_sleep(1)", "statement_timeout"),
    ("57014", "canceling statement due to user request", "SELECT pg_sleep(1)", "cancelled"),
    ("40P01", "deadlock detected", "UPDATE t SET x = 1", "deadlock"),
    ("40001", "canceling statement due to conflict with recovery", "SELECT 1", "recovery_conflict"),
    ("08006", "connection failure", "SELECT 1", "connection_lost"),
    ("42601", "syntax error", "SELCT 1", "error"),
    (None, "", "SELECT 1", "error"),
])
def test_postgres_classification(code, message, sql, want):
    assert POSTGRES.classify(code, message, sql) == want


@pytest.mark.parametrize("dialect", [MARIADB, MYSQL], ids=["mariadb", "mysql8"])
@pytest.mark.parametrize("code,sql,want", [
    ("3572", ROW + " NOWAIT", "refused"),
    (1205, ROW + " NOWAIT", "refused"),
    (1205, ROW + " WAIT 0", "refused"),
    (1205, ROW, "timed_out"),
    (1213, ROW, "deadlock"),
    (3024, "SELECT SLEEP(2)", "statement_timeout"),
    (1969, "SELECT SLEEP(2)", "statement_timeout"),
    (1317, "SELECT SLEEP(2)", "cancelled"),
    (2013, "SELECT 1", "connection_lost"),
    (1064, "SELCT 1", "error"),
])
def test_mysql_family_classification(dialect, code, sql, want):
    assert dialect.classify(code, "message", sql) == want


def test_no_code_on_a_closed_connection():
    assert POSTGRES.classify(None, "", "SELECT 1", connection_closed=True) == "connection_lost"
    assert MARIADB.classify(None, "", "SELECT 1", connection_closed=True) == "connection_lost"


def test_settle_once_the_budget_is_known():
    zero = Budget("innodb_lock_wait_timeout = 0", 0.0)
    some = Budget("innodb_lock_wait_timeout", 50_000.0)
    # a lock timeout at a zero budget: the server did not wait at all
    assert MARIADB.settle("timed_out", "1205", zero) == ("refused", zero)
    assert MYSQL.settle("timed_out", "1205", some) == ("timed_out", some)
    assert MYSQL.settle("timed_out", "1205", None) == ("timed_out", None)
    # PostgreSQL's row NOWAIT refused: NOWAIT's budget, not the table lock's lock_timeout
    lock_timeout = Budget("lock_timeout", 100.0)
    assert POSTGRES.settle("refused", "55P03", lock_timeout) == ("refused", NOWAIT)
    assert POSTGRES.settle("refused", "55P03", NOWAIT) == ("refused", NOWAIT)
    assert POSTGRES.settle("timed_out", "55P03", lock_timeout) == ("timed_out", lock_timeout)
    assert POSTGRES.settle("timed_out", "1205", Budget("x", 0.0)) == ("timed_out", Budget("x", 0.0))


def test_lock_error_codes_told_early():
    assert POSTGRES.lock_error_codes == frozenset({"55P03", "57014", "40P01"})
    assert not MARIADB.lock_error_codes and not MYSQL.lock_error_codes


# ------------------------------------------------------------ budget syntax

PG_SET = (Budget("lock_timeout", 100.0), Budget("statement_timeout", 0.0))
MY_SET = (Budget("innodb_lock_wait_timeout", 50_000.0), Budget("lock_wait_timeout", 86_400_000.0),
          Budget("max_statement_time", 0.0), Budget("max_execution_time", 0.0))


def test_postgres_budget_syntax():
    assert POSTGRES.statement_budget(PG_SET, "LOCK TABLE accounts IN ROW SHARE MODE NOWAIT") == NOWAIT
    # FOR UPDATE NOWAIT refuses row locks only: its table lock waits up to lock_timeout
    assert POSTGRES.statement_budget(PG_SET, ROW + " NOWAIT") == Budget("lock_timeout", 100.0)
    # no SET STATEMENT, no WAIT n on PostgreSQL
    assert POSTGRES.statement_budget(PG_SET, ROW + " WAIT 2") == Budget("lock_timeout", 100.0)
    both = (Budget("lock_timeout", 900.0), Budget("statement_timeout", 300.0))
    assert POSTGRES.statement_budget(both, ROW) == Budget("statement_timeout", 300.0)
    assert POSTGRES.statement_budget((Budget("lock_timeout", 0.0),), ROW) is None
    assert not POSTGRES.is_metadata_wait("ALTER TABLE accounts ADD c int")


@pytest.mark.parametrize("dialect", [MARIADB, MYSQL], ids=["mariadb", "mysql8"])
def test_mysql_family_budget_syntax(dialect):
    assert dialect.statement_budget(MY_SET, ROW + " NOWAIT") == NOWAIT
    assert dialect.statement_budget(MY_SET, ROW + " WAIT 2") == Budget("WAIT 2", 2000.0)
    assert dialect.statement_budget(MY_SET, ROW + " WAIT 1.5") == Budget("WAIT 1.5 (read as 1)", 1000.0)
    assert dialect.statement_budget(MY_SET, ROW) == Budget("innodb_lock_wait_timeout", 50_000.0)
    assert dialect.statement_budget(MY_SET, ROW, metadata=True) == Budget("lock_wait_timeout", 86_400_000.0)
    assert dialect.is_metadata_wait("ALTER TABLE accounts ADD c int")
    assert dialect.is_metadata_wait("LOCK TABLES accounts WRITE")
    assert not dialect.is_metadata_wait(ROW)
    assert dialect.statement_budget(MY_SET, "TRUNCATE accounts") == Budget("lock_wait_timeout", 86_400_000.0)
    assert dialect.statement_budget(MY_SET, "SET STATEMENT innodb_lock_wait_timeout = 3 FOR " + ROW) == \
        Budget("SET STATEMENT innodb_lock_wait_timeout", 3000.0)
    assert dialect.statement_budget(MY_SET, "SET STATEMENT max_execution_time = 250 FOR " + ROW) == \
        Budget("SET STATEMENT max_execution_time", 250.0)  # in ms, as the server takes it
    zero = (Budget("innodb_lock_wait_timeout", 0.0),)
    assert dialect.statement_budget(zero, ROW) == Budget("innodb_lock_wait_timeout = 0", 0.0)
    assert dialect.statement_budget(MY_SET, "SET STATEMENT innodb_lock_wait_timeout = 0 FOR " + ROW) == \
        Budget("SET STATEMENT innodb_lock_wait_timeout = 0", 0.0)
    assert dialect.statement_budget((), ROW) is None


def test_budget_names_ranges_and_rules():
    assert POSTGRES.budget_names == ("lock_timeout", "statement_timeout", "deadlock_timeout",
                                     "idle_in_transaction_session_timeout")
    assert MARIADB.budget_names == MYSQL.budget_names
    assert POSTGRES.transactional_settings and not MARIADB.transactional_settings
    # MariaDB takes 0 for a lock wait timeout (a refusal), MySQL cuts it to 1
    assert MARIADB.budget_ranges["innodb_lock_wait_timeout"][0] == 0
    assert MYSQL.budget_ranges["innodb_lock_wait_timeout"][0] == 1
    assert "max_statement_time" in MARIADB.budget_ranges and "max_execution_time" in MYSQL.budget_ranges
    assert MARIADB.fractional_budgets == frozenset({"max_statement_time"})


# ------------------------------------------------------------ prepared transactions, locks

def test_prepared_transactions():
    assert POSTGRES.rollback_prepared("'payment-42'") == "ROLLBACK PREPARED 'payment-42'"
    assert MARIADB.rollback_prepared("X'78'") == "XA ROLLBACK X'78'" == MYSQL.rollback_prepared("X'78'")
    assert POSTGRES.prepared_changes("PREPARE TRANSACTION 'x'", ["PREPARE TRANSACTION"]) == (["'x'"], [])
    assert POSTGRES.prepared_changes("PREPARE TRANSACTION 'x'", ["ROLLBACK"]) == ([], [])
    assert MYSQL.prepared_changes("XA PREPARE 'x'; XA ROLLBACK 'y'", ["", ""]) == (["X'78'"], ["X'79'"])
    assert MARIADB.prepared_changes("XA PREPARE 'x'", None) == (["X'78'"], [])
    assert MARIADB.xa_owner_finishes and not POSTGRES.xa_owner_finishes


def test_lock_rules():
    assert MARIADB.tracks_metadata_locks and MYSQL.tracks_metadata_locks and not POSTGRES.tracks_metadata_locks
    assert MARIADB.nowait_bounds_table_locks
    assert not MYSQL.nowait_bounds_table_locks and not POSTGRES.nowait_bounds_table_locks
    assert POSTGRES.deadlock_in_detail and not MYSQL.deadlock_in_detail
    assert MARIADB.qualified_table_names and not POSTGRES.qualified_table_names
    assert MARIADB.monitor_sees_own_changes and not POSTGRES.monitor_sees_own_changes


def test_lock_view_sql_by_server_version():
    old, new = POSTGRES.lock_view("waits", 130000), POSTGRES.lock_view("waits", 180000)
    assert "waitstart" not in old and "waitstart" in new
    assert POSTGRES.lock_view("waits", 140000) == new
    assert POSTGRES.lock_view("waits") == old  # no version given: the plain file
    assert not new.startswith("--")  # the comment lines that document it are left out
    assert "INNODB_LOCK_WAITS" in MARIADB.lock_view("innodb_lock_waits").upper()
    assert "DATA_LOCK_WAITS" in MYSQL.lock_view("data_lock_waits").upper()


# ------------------------------------------------------------ what lockrace sets, and where it looks

def test_flavor_from_the_servers_version_and_dialect_by_engine():
    assert mysql_dialect_of("10.11.19-MariaDB-0+deb12u1") is MARIADB
    assert mysql_dialect_of("11.4.5-MariaDB-log") is MARIADB
    assert mysql_dialect_of("9.7.4") is MYSQL
    assert mysql_dialect_of("8.4.10-commercial") is MYSQL
    assert family_dialect("postgres") is POSTGRES is family_dialect("postgres-standby")
    assert family_dialect("mysql") is MYSQL_FAMILY is family_dialect("galera")
    assert MYSQL_FAMILY.label == "MySQL/MariaDB" and MYSQL_FAMILY.family == "mysql"
    with pytest.raises(ValueError):
        family_dialect("oracle")


def test_settings_lockrace_sets():
    assert POSTGRES.set_sql("lock_timeout", 100) == "SET lock_timeout = '100ms'"
    assert POSTGRES.set_sql("lock_timeout", 100, local=True) == "SET LOCAL lock_timeout = '100ms'"
    assert POSTGRES.reset_sql("lock_timeout") == "RESET lock_timeout"
    assert MARIADB.set_sql("innodb_lock_wait_timeout", 2000) == "SET SESSION innodb_lock_wait_timeout = 2"
    assert MYSQL.reset_sql("innodb_lock_wait_timeout") == "SET SESSION innodb_lock_wait_timeout = DEFAULT"
    assert POSTGRES.ddl_budget_sql(None) == "SET lock_timeout = 0"
    assert POSTGRES.ddl_budget_sql(250, local=True) == "SET LOCAL lock_timeout = '250ms'"
    assert MYSQL_FAMILY.ddl_budget_sql(2000) == "SET SESSION lock_wait_timeout = 2"
    assert MYSQL_FAMILY.ddl_budget_sql(None) == "SET SESSION lock_wait_timeout = 31536000"  # its ceiling
    # the bound on a connection's statements: seconds (fractions too) on MariaDB, ms on MySQL
    assert MARIADB.limit_clause(0.5) == "max_statement_time = 0.5"
    assert MYSQL.limit_clause(5) == "max_execution_time = 5000"
    assert POSTGRES.statement_limit_sql(120) == "SET statement_timeout = '120s'"
    assert MARIADB.statement_limit_sql(120) == "SET SESSION max_statement_time = 120"
    assert MYSQL.statement_limit_sql(120) == "SET SESSION max_execution_time = 120000"


def test_session_budgets_read_in_each_flavors_units():
    assert MYSQL.budgets_sql().endswith("@@max_execution_time")
    assert MARIADB.budgets_sql("global.") == ("SELECT @@global.innodb_lock_wait_timeout, @@global.lock_wait_timeout,"
                                              " @@global.max_statement_time")
    assert [(b.name, b.ms) for b in MYSQL.budgets_from((50, 31536000, 1500))] == [
        ("innodb_lock_wait_timeout", 50_000.0), ("lock_wait_timeout", 31_536_000_000.0), ("max_execution_time", 1500.0)]
    assert MARIADB.budgets_sql().endswith("@@max_statement_time")
    assert MARIADB.budgets_from(("50", "86400", "0.25"))[2] == Budget("max_statement_time", 250.0)


def test_where_lock_waits_are_read_and_what_bench_and_rehearse_may_ask():
    assert MARIADB.lock_views_cached and not MARIADB.lock_views_in_performance_schema
    assert MYSQL.lock_views_in_performance_schema and not MYSQL.lock_views_cached
    assert MARIADB.first_poll_s > MYSQL.first_poll_s  # MariaDB: not before the wait can show
    assert MARIADB.statement_wait_n and not MYSQL.statement_wait_n and not POSTGRES.statement_wait_n
    assert (POSTGRES.online_ddl, MYSQL_FAMILY.online_ddl) == ("concurrently", "instant")
    assert POSTGRES.transactional_ddl and not MYSQL_FAMILY.transactional_ddl
    assert "pgroll" in POSTGRES.migration_presets and "pgroll" not in MYSQL_FAMILY.migration_presets
    assert (POSTGRES.identifier_quote, MYSQL.identifier_quote) == ('"', "`")


def test_answers_as_each_servers_client_prints_them():
    assert POSTGRES.error_text("55P03", "could not obtain lock on row", "ERROR") == \
        "ERROR: 55P03: could not obtain lock on row"
    assert POSTGRES.error_text(None, "server closed the connection") == "ERROR: server closed the connection"
    assert MYSQL.error_text("3572", "Statement aborted", sqlstate="HY000") == "ERROR 3572 (HY000): Statement aborted"
    assert MARIADB.error_text("1064", "You have an error", sqlstate="42000") == "ERROR 1064 (42000): You have an error"
    assert (POSTGRES.empty_result, MARIADB.empty_result, MYSQL.empty_result) == ("", "Empty set", "Empty set")
    assert dialect_for("mysql") is MYSQL_FAMILY  # a transcript for any MySQL-family server
