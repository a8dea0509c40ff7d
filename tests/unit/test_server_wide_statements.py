"""Server-wide statements (ALTER SYSTEM, pg_reload_conf(), CREATE ROLE, SET GLOBAL, ...)
are found by reading the SQL as the server does (core/sqltext.py): a comment between
the words or a statement after another on one line does not slip through; a word
inside a string literal or a comment is not a statement. What lockrace then refuses
on a server it did not start: tests/cli/test_fault_server_wide.py."""

from __future__ import annotations

import pytest

from lockrace.core.serverwide import server_wide


PG_WIDE = [
    ("ALTER /* x */ SYSTEM SET work_mem = '7MB'", "ALTER SYSTEM"),
    ("SELECT 1; alter\nsystem reset all", "ALTER SYSTEM"),
    ("SELECT pg_reload_conf()", "pg_reload_conf()"),
    ("SELECT x FROM (SELECT pg_catalog.pg_reload_conf() AS x) s", "pg_reload_conf()"),
    ("ALTER DATABASE postgres SET work_mem = '1MB'", "ALTER DATABASE"),
    ("ALTER ROLE CURRENT_USER SET work_mem = '1MB'", "ALTER ROLE"),
    ("CREATE ROLE intruder", "CREATE ROLE"),
    ("DROP DATABASE other", "DROP DATABASE"),
    ("CREATE TABLESPACE t LOCATION '/tmp'", "CREATE TABLESPACE"),
    ("GRANT pg_read_all_data TO someone", "GRANT of a role"),
    ("CREATE EVENT TRIGGER e ON ddl_command_end EXECUTE FUNCTION f()", "CREATE EVENT TRIGGER"),
    ("DO $$ BEGIN EXECUTE 'ALTER SYSTEM SET work_mem = ''7MB'''; END $$", "ALTER SYSTEM"),
    ("DO $body$ BEGIN PERFORM pg_reload_conf(); END $body$", "pg_reload_conf()"),
]
PG_SANDBOXED = [
    "SELECT 'ALTER SYSTEM SET work_mem = 1'",
    "SELECT 1 /* ALTER SYSTEM SET work_mem = 1 */",
    "-- ALTER SYSTEM\nSELECT 1",
    "SELECT $$pg_reload_conf()$$",
    "GRANT SELECT ON accounts TO PUBLIC",
    "SET work_mem = '7MB'",
    "ALTER TABLE accounts ADD COLUMN note text",
    "CREATE TABLE system (id int)",
]
MY_WIDE = [
    ("SET GLOBAL wait_timeout = 5", "SET GLOBAL"),
    ("SET @@global.wait_timeout = 5", "SET GLOBAL"),
    ("SET SESSION sql_mode = '', GLOBAL wait_timeout = 5", "SET GLOBAL"),
    ("SET /* x */ PERSIST max_connections = 10", "SET PERSIST"),
    ("/*!50000 SET GLOBAL wait_timeout = 5 */", "SET GLOBAL"),
    ("CREATE OR REPLACE USER intruder", "CREATE USER"),
    ("GRANT ALL ON *.* TO someone", "GRANT"),
    ("FLUSH TABLES WITH READ LOCK", "FLUSH TABLES WITH READ LOCK"),
    ("FLUSH PRIVILEGES", "FLUSH"),
    ("CREATE DATABASE other", "CREATE DATABASE"),
    ("INSTALL SONAME 'ha_example'", "INSTALL"),
    ("STOP SLAVE", "STOP REPLICA"),
]
MY_SANDBOXED = [
    "SET @global = 1",
    "SET SESSION wait_timeout = 5",
    "SET @@session.wait_timeout = 5",
    "SELECT 'SET GLOBAL wait_timeout = 5'",
    "SELECT 1 # SET GLOBAL wait_timeout = 5",
    "SET STATEMENT max_statement_time = 1 FOR SELECT 1",
    "FLUSH TABLES accounts FOR EXPORT",
]


@pytest.mark.parametrize("sql,named", PG_WIDE)
def test_pg_server_wide_statements_are_found(sql, named):
    assert server_wide(sql, "postgres") == named


@pytest.mark.parametrize("sql", PG_SANDBOXED)
def test_pg_sandboxed_statements_are_not(sql):
    assert server_wide(sql, "postgres") is None


@pytest.mark.parametrize("sql,named", MY_WIDE)
def test_mysql_server_wide_statements_are_found(sql, named):
    assert server_wide(sql, "mysql") == named


@pytest.mark.parametrize("sql", MY_SANDBOXED)
def test_mysql_sandboxed_statements_are_not(sql):
    assert server_wide(sql, "mysql") is None
