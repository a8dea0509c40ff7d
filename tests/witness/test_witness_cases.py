"""Hand-written cases: each way lockrace once changed the race it watched, run
through lockrace and through raw driver connections, compared statement by
statement and by the tables' final contents (see witness_harness.py)."""

from __future__ import annotations

import pytest

from witness_harness import Case, Step, compare

TIME = {"rows": "a time of day differs run to run"}
RANDOM = {"rows": "an unseeded random value differs run to run"}

PG_JOBS = ["CREATE TABLE jobs (id int PRIMARY KEY, task text NOT NULL)",
           "INSERT INTO jobs VALUES (1, 'send email'), (2, 'resize image'), (3, 'build report')"]
PG_VOLATILE = PG_JOBS + [
    "CREATE SEQUENCE tickets",
    "CREATE TABLE audit (job int)",
    "CREATE FUNCTION claim(int) RETURNS int LANGUAGE sql VOLATILE AS 'INSERT INTO audit VALUES ($1) RETURNING $1'",
]


def S(session: str, sql: str, **ignore: str) -> Step:
    return Step(session, sql, dict(ignore))


def _locked_one(*after: Step) -> list[Step]:
    """A holds job 1 FOR UPDATE while B runs ``after``; then A commits."""
    return [S("A", "BEGIN"), S("A", "SELECT * FROM jobs WHERE id = 1 FOR UPDATE"), *after, S("A", "COMMIT")]


PG_CASES = [
    # 1. a SKIP LOCKED read with FETCH FIRST (or a LIMIT the count cannot repeat), then COMMIT
    *[Case(f"skip-locked-{label}-then-commit", PG_JOBS, _locked_one(
        S("B", "BEGIN"), S("B", "INSERT INTO jobs VALUES (4, 'new job')"),
        S("B", f"SELECT id FROM jobs ORDER BY id {limit} FOR UPDATE SKIP LOCKED"),
        S("B", "COMMIT"), S("B", "SELECT id, task FROM jobs ORDER BY id")))
      for label, limit in (("fetch-first", "FETCH FIRST 1 ROWS ONLY"), ("limit-all", "LIMIT ALL"),
                           ("limit-expression", "LIMIT 1+1"), ("limit-1", "LIMIT 1"))],
    # 2. volatile functions in a SKIP LOCKED read
    Case("skip-locked-volatile-rolled-back", PG_VOLATILE, _locked_one(
        S("B", "BEGIN"),
        S("B", "SELECT claim(id), nextval('tickets') FROM jobs ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED"),
        S("B", "ROLLBACK"),
        S("B", "SELECT count(*) FROM audit"))),
    Case("skip-locked-volatile-autocommit", PG_VOLATILE, _locked_one(
        S("B", "SELECT claim(id), nextval('tickets') FROM jobs ORDER BY id LIMIT 2 FOR UPDATE SKIP LOCKED"),
        S("B", "SELECT nextval('tickets')"),
        S("C", "SELECT id, clock_timestamp() FROM jobs ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED", **TIME),
        S("C", "SELECT gen_random_uuid() IS NOT NULL, id FROM jobs ORDER BY id FOR UPDATE SKIP LOCKED"),
        S("D", "SELECT random() < 2, id FROM jobs ORDER BY id LIMIT 1 FOR SHARE SKIP LOCKED"))),
    Case("skip-locked-in-own-writes", PG_JOBS, _locked_one(
        S("B", "BEGIN"), S("B", "DELETE FROM jobs WHERE id = 2"),
        S("B", "SELECT * FROM jobs ORDER BY id LIMIT 5 FOR UPDATE SKIP LOCKED"),
        S("B", "SELECT * FROM jobs ORDER BY id FOR UPDATE SKIP LOCKED; SELECT 2"),
        S("B", "COMMIT"))),
    # 3. budgets and isolation inside the user's transaction
    Case("set-transaction-after-begin", PG_JOBS, [
        S("A", "BEGIN"), S("A", "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE"), S("A", "SHOW transaction_isolation"),
        S("A", "SELECT count(*) FROM jobs"), S("A", "SET TRANSACTION ISOLATION LEVEL READ COMMITTED"),
        S("A", "ROLLBACK"), S("A", "SHOW transaction_isolation")]),
    Case("set-transaction-read-only", PG_JOBS, [
        S("A", "BEGIN"), S("A", "SET TRANSACTION READ ONLY"), S("A", "INSERT INTO jobs VALUES (9, 'x')"),
        S("A", "ROLLBACK"), S("A", "START TRANSACTION"), S("A", "SET LOCAL lock_timeout = '150ms'"),
        S("A", "SHOW lock_timeout"), S("A", "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"),
        S("A", "COMMIT"), S("A", "SHOW lock_timeout")]),
    Case("repeatable-read-snapshot-timing", PG_JOBS, [
        S("A", "BEGIN ISOLATION LEVEL REPEATABLE READ"),
        S("B", "UPDATE jobs SET task = '999' WHERE id = 1"),
        S("A", "SELECT task FROM jobs WHERE id = 1"),
        S("A", "UPDATE jobs SET task = task || '!' WHERE id = 1"),
        S("A", "COMMIT")]),
    Case("serializable-snapshot-after-set-local", PG_JOBS, [
        S("A", "BEGIN ISOLATION LEVEL SERIALIZABLE"), S("A", "SET LOCAL lock_timeout = '2s'"),
        S("B", "UPDATE jobs SET task = 'b' WHERE id = 2"),
        S("A", "SELECT task FROM jobs WHERE id = 2"), S("A", "UPDATE jobs SET task = 'a' WHERE id = 2"),
        S("A", "COMMIT")]),
    Case("lock-timeout-set-local-and-savepoints", PG_JOBS, [
        S("A", "BEGIN"), S("A", "UPDATE jobs SET task = 'A' WHERE id = 1"),
        S("B", "BEGIN"), S("B", "SET LOCAL lock_timeout = '100ms'"), S("B", "SAVEPOINT s1"),
        S("B", "UPDATE jobs SET task = 'B' WHERE id = 1"),
        S("B", "ROLLBACK TO SAVEPOINT s1"), S("B", "SHOW lock_timeout"),
        S("B", "SELECT * FROM jobs WHERE id = 1 FOR UPDATE NOWAIT"),
        S("B", "ROLLBACK TO s1"), S("B", "UPDATE jobs SET task = 'B' WHERE id = 2"), S("B", "RELEASE s1"),
        S("B", "COMMIT"), S("A", "COMMIT"), S("B", "SHOW lock_timeout")]),
    Case("errors-and-failed-transactions", PG_JOBS, [
        S("A", "BEGIN"), S("A", "SELECT 1/0"), S("A", "SELECT 1"), S("A", "COMMIT"),
        S("A", "COMMIT"), S("A", "SELECT * FROM nosuch"), S("A", "SET lock_timeout = 'soon'"),
        S("A", "SELECT 1; SELECT 1/0; SELECT 3"), S("A", "SHOW lock_timeout")]),
]

PG_CASES += [
    # the answer's corners: empty statements, several statements, notices, large results
    Case("protocol-corners", PG_JOBS, [
        S("A", "-- only a comment"), S("A", ";"), S("A", "SELECT 1;;SELECT 2"), S("A", "COMMIT"),
        S("A", "ROLLBACK; BEGIN; SET LOCAL lock_timeout = '1s'; SHOW lock_timeout"), S("A", "SAVEPOINT x; COMMIT"),
        S("A", "SELECT g, md5(g::text) FROM generate_series(1, 2500) g"),
        S("A", "DO $$BEGIN RAISE NOTICE 'hello %', 1; RAISE WARNING 'careful'; END$$"),
        S("A", "SET statement_timeout = '100ms'"), S("A", "SELECT pg_sleep(1)"), S("A", "RESET statement_timeout"),
        S("A", "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE"),
        S("A", "BEGIN"), S("A", "SHOW transaction_isolation"), S("A", "DISCARD ALL"), S("A", "END"),
        S("A", "DISCARD ALL"), S("A", "SHOW transaction_isolation"), S("A", "RESET ALL"),
        S("A", "SELECT set_config('lock_timeout', '250ms', false)"), S("A", "SHOW lock_timeout")]),
    Case("prepared-transaction-finished-elsewhere", PG_JOBS, [
        S("A", "BEGIN"), S("A", "INSERT INTO jobs VALUES (7, 'prepared')"), S("A", "PREPARE TRANSACTION 'witness-1'"),
        S("A", "SELECT count(*) FROM jobs"), S("B", "SELECT * FROM jobs WHERE id = 7"),
        S("B", "COMMIT PREPARED 'witness-1'"), S("B", "SELECT * FROM jobs WHERE id = 7"),
        S("A", "PREPARE TRANSACTION 'witness-2'"), S("A", "ROLLBACK PREPARED 'witness-2'")]),
    Case("listen-notify", PG_JOBS, [
        S("A", "LISTEN jobs_changed"), S("B", "NOTIFY jobs_changed, 'one'"), S("A", "SELECT 1"),
        S("B", "BEGIN"), S("B", "SELECT pg_notify('jobs_changed', 'two')"), S("B", "COMMIT"),
        S("A", "UNLISTEN *"), S("A", "SELECT 2")]),
    Case("lock-errors-outside-a-transaction", PG_JOBS, [
        S("A", "BEGIN"), S("A", "LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE"),
        S("B", "SET lock_timeout = '100ms'"), S("B", "SELECT * FROM jobs"),
        S("B", "LOCK TABLE jobs IN SHARE MODE NOWAIT"), S("B", "SELECT * FROM jobs FOR UPDATE NOWAIT"),
        S("B", "SELECT 1"), S("B", "SET lock_timeout = 0; SELECT 2"), S("A", "ROLLBACK"),
        S("B", "SELECT * FROM jobs WHERE id = 1 FOR UPDATE NOWAIT"), S("B", "SHOW lock_timeout")]),
]

MY_JOBS = ["CREATE TABLE jobs (id int PRIMARY KEY, task varchar(40) NOT NULL) ENGINE=InnoDB",
           "INSERT INTO jobs VALUES (1, 'send email'), (2, 'resize image'), (3, 'build report')"]
MY_VOLATILE = MY_JOBS + [
    "CREATE SEQUENCE tickets",
    "CREATE TABLE audit (job int) ENGINE=InnoDB",
    "CREATE FUNCTION claim(i int) RETURNS int MODIFIES SQL DATA BEGIN INSERT INTO audit VALUES (i); RETURN i; END",
    "CREATE TABLE orders (id int AUTO_INCREMENT PRIMARY KEY, note varchar(10)) ENGINE=InnoDB",
]

MY_CASES = [
    # 4. the diagnostics area, FOUND_ROWS(), ROW_COUNT(), LAST_INSERT_ID() after statements
    Case("show-warnings-after-set", MY_JOBS, [
        S("A", "SET SESSION innodb_lock_wait_timeout = 2000000000"), S("A", "SHOW WARNINGS"),
        S("A", "SELECT @@innodb_lock_wait_timeout"),
        S("A", "BEGIN"), S("A", "SET SESSION lock_wait_timeout = 0"), S("A", "SHOW WARNINGS"),
        S("A", "COMMIT"), S("A", "SHOW WARNINGS"), S("A", "SELECT @@lock_wait_timeout"),
        S("A", "SET SESSION innodb_lock_wait_timeout = 1"), S("A", "SHOW COUNT(*) WARNINGS")]),
    Case("row-count-found-rows-last-insert-id", MY_VOLATILE, [
        S("A", "BEGIN"), S("A", "UPDATE jobs SET task = 'x' WHERE id < 3"), S("A", "SELECT ROW_COUNT()"),
        S("A", "SELECT SQL_CALC_FOUND_ROWS * FROM jobs ORDER BY id LIMIT 1"), S("A", "SELECT FOUND_ROWS()"),
        S("A", "INSERT INTO orders (note) VALUES ('a'), ('b')"), S("A", "COMMIT"),
        S("A", "SELECT LAST_INSERT_ID(), ROW_COUNT()"),
        S("A", "START TRANSACTION"), S("A", "SELECT ROW_COUNT()"), S("A", "ROLLBACK"), S("A", "SELECT ROW_COUNT()"),
        S("A", "INSERT INTO orders (note) VALUES ('toolongvalue1')"), S("A", "SHOW WARNINGS"),
        S("A", "SELECT 1/0"), S("A", "SHOW WARNINGS")]),
    # 4. NEXTVAL(), RAND(), a stored function in a SKIP LOCKED read
    Case("skip-locked-volatile-mariadb", MY_VOLATILE, _locked_one(
        S("B", "BEGIN"),
        S("B", "SELECT id, NEXTVAL(tickets) FROM jobs ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED"),
        S("B", "SELECT RAND(7), id FROM jobs ORDER BY id LIMIT 2 FOR UPDATE SKIP LOCKED"),
        S("B", "SELECT RAND() < 2, id FROM jobs ORDER BY id FOR UPDATE SKIP LOCKED"),
        S("B", "SELECT claim(id) FROM jobs ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED"),
        S("B", "ROLLBACK"), S("B", "SELECT NEXTVAL(tickets)"), S("B", "SELECT COUNT(*) FROM audit"),
        S("C", "SELECT claim(id), RAND() FROM jobs ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED", **RANDOM),
        S("C", "SELECT id FROM jobs ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED"))),
    Case("skip-locked-then-commit-mariadb", MY_JOBS, _locked_one(
        S("B", "BEGIN"), S("B", "INSERT INTO jobs VALUES (4, 'new job')"),
        S("B", "SELECT id FROM jobs ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED"),
        S("B", "SELECT id FROM jobs ORDER BY id LIMIT 1 OFFSET 1 FOR UPDATE SKIP LOCKED"),
        S("B", "COMMIT"), S("B", "SELECT id FROM jobs ORDER BY id"))),
    Case("set-transaction-inside-transaction-mariadb", MY_JOBS, [
        S("A", "BEGIN"), S("A", "SELECT COUNT(*) FROM jobs"),
        S("A", "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE"), S("A", "SELECT @@tx_isolation"),
        S("A", "COMMIT"), S("A", "SET TRANSACTION ISOLATION LEVEL READ COMMITTED"), S("A", "BEGIN"),
        S("A", "SELECT @@tx_isolation"), S("A", "COMMIT"), S("A", "START TRANSACTION READ ONLY"),
        S("A", "UPDATE jobs SET task = 'ro' WHERE id = 1"), S("A", "ROLLBACK")]),
    Case("repeatable-read-snapshot-timing-mariadb", MY_JOBS, [
        S("A", "BEGIN"), S("B", "UPDATE jobs SET task = '999' WHERE id = 1"),
        S("A", "SELECT task FROM jobs WHERE id = 1"), S("B", "UPDATE jobs SET task = '1000' WHERE id = 1"),
        S("A", "SELECT task FROM jobs WHERE id = 1"), S("A", "SELECT task FROM jobs WHERE id = 1 FOR UPDATE"),
        S("A", "COMMIT")]),
    Case("lock-wait-timeout-and-savepoints-mariadb", MY_JOBS, [
        S("A", "BEGIN"), S("A", "UPDATE jobs SET task = 'A' WHERE id = 1"),
        S("B", "SET SESSION innodb_lock_wait_timeout = 1"), S("B", "BEGIN"), S("B", "SAVEPOINT s1"),
        S("B", "UPDATE jobs SET task = 'B2' WHERE id = 2"),
        S("B", "UPDATE jobs SET task = 'B' WHERE id = 1"),
        S("B", "SELECT * FROM jobs WHERE id = 1 FOR UPDATE NOWAIT"),
        S("B", "ROLLBACK TO SAVEPOINT s1"), S("B", "UPDATE jobs SET task = 'B3' WHERE id = 3"),
        S("B", "COMMIT"), S("A", "COMMIT")]),
    Case("autocommit-off-and-corners-mariadb", MY_VOLATILE, [
        S("A", "SET autocommit = 0"), S("A", "UPDATE jobs SET task = 'held' WHERE id = 1"),
        S("B", "SET SESSION innodb_lock_wait_timeout = 1"), S("B", "SELECT * FROM jobs WHERE id = 1 FOR UPDATE"),
        S("B", "SELECT id FROM jobs ORDER BY id FOR UPDATE SKIP LOCKED"), S("A", "SELECT @@in_transaction"),
        S("A", "COMMIT"), S("A", "SELECT @@in_transaction"), S("A", "INSERT INTO orders (note) VALUES ('z')"),
        S("A", "SET autocommit = 1"), S("A", "SELECT @@in_transaction, LAST_INSERT_ID()"),
        S("A", "SELECT seq FROM seq_1_to_2500"), S("A", "SELECT 1; SELECT nosuch; SELECT 3"),
        S("A", "SET STATEMENT max_statement_time = 0.1 FOR SELECT SLEEP(1)"),
        S("A", "SET STATEMENT innodb_lock_wait_timeout = 1 FOR SELECT @@innodb_lock_wait_timeout"),
        S("A", "SELECT @@innodb_lock_wait_timeout"), S("A", "DO 1"), S("A", "-- a comment only"),
        S("A", "SET @x = 5; SELECT @x")]),
    # a SELECT that begins a transaction (autocommit off) says so only in its closing EOF packet
    Case("transaction-begun-by-a-select-mariadb", MY_JOBS, [
        S("A", "SET autocommit = 0"), S("A", "SELECT task FROM jobs WHERE id = 1"),
        S("B", "UPDATE jobs SET task = '999' WHERE id = 1"), S("A", "SELECT task FROM jobs WHERE id = 1"),
        S("A", "COMMIT"), S("A", "SELECT task FROM jobs WHERE id = 1"), S("A", "SELECT @@in_transaction"),
        S("A", "ROLLBACK; SELECT 1"), S("A", "SET autocommit = 1"), S("A", "START TRANSACTION; SELECT 2"),
        S("A", "COMMIT; SELECT 3"), S("A", "BEGIN"), S("A", "SELECT 4; COMMIT")]),
    Case("xa-transaction-finished-elsewhere-mariadb", MY_JOBS, [
        S("A", "XA START 'witness-1'"), S("A", "INSERT INTO jobs VALUES (7, 'xa')"), S("A", "XA END 'witness-1'"),
        S("A", "XA PREPARE 'witness-1'"), S("A", "SELECT 1"), S("B", "XA RECOVER"),
        S("A", "XA COMMIT 'witness-1'"), S("B", "SELECT * FROM jobs WHERE id = 7")]),
]


@pytest.mark.parametrize("engine", ["postgres"])
@pytest.mark.parametrize("case", PG_CASES, ids=[c.name for c in PG_CASES])
async def test_witness_postgres_case(case, engine, backend):
    assert await compare(backend, case) == []


@pytest.mark.mariadb_only  # written with MariaDB's SQL (sequences, @@in_transaction, seq_1_to_N, NEXTVAL)
@pytest.mark.parametrize("engine", ["mysql"])
@pytest.mark.parametrize("case", MY_CASES, ids=[c.name for c in MY_CASES])
async def test_witness_mariadb_case(case, engine, backend):
    assert await compare(backend, case) == []
