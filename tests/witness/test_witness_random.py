"""Seeded random step sequences (transactions, SET / SET LOCAL / SET TRANSACTION,
savepoints, locking reads with SKIP LOCKED and NOWAIT, writes, errors, COMMIT and
ROLLBACK over a few tables) through lockrace and through raw driver connections,
compared statement by statement and by the tables' final contents (see
witness_harness.py).  The seeds are fixed: a failure names its seed and replays.

Every session bounds its lock waits first (PostgreSQL: lock_timeout 600-900 ms, below
deadlock_timeout, so that a cycle ends by the waiters' own timeouts, in the order
they began to wait; MariaDB: innodb_lock_wait_timeout = 1 s, a deadlock is
detected at once), so that a step sent to a session still waiting costs at most
that long, and what happens does not depend on how fast either side is.
"""

from __future__ import annotations

import random

import pytest

from witness_harness import Case, Step, compare

SEEDS = [11, 23, 37, 41, 59, 67, 73, 89, 97, 101]
STEPS = 40
SESSIONS = "ABC"
TABLES = ("t1", "t2")

PG_SETUP = [f"CREATE TABLE {t} (id int PRIMARY KEY, v int NOT NULL)" for t in TABLES] + \
           [f"INSERT INTO {t} SELECT g, g * 10 FROM generate_series(1, 4) g" for t in TABLES]
MY_SETUP = [f"CREATE TABLE {t} (id int PRIMARY KEY, v int NOT NULL) ENGINE=InnoDB" for t in TABLES] + \
           [f"INSERT INTO {t} VALUES (1, 10), (2, 20), (3, 30), (4, 40)" for t in TABLES]

PG_LEVELS = ("READ COMMITTED", "REPEATABLE READ", "SERIALIZABLE")
MY_LEVELS = ("READ COMMITTED", "REPEATABLE READ", "SERIALIZABLE")


def _pg_statement(r: random.Random) -> str:
    t, k = r.choice(TABLES), r.choice((1, 1, 1, 2, 2, 3, 5))
    ms = r.randrange(600, 901, 50)
    return _pick(r, [
        lambda: "BEGIN",
        lambda: f"BEGIN ISOLATION LEVEL {r.choice(PG_LEVELS)}",
        lambda: "START TRANSACTION",
        lambda: "COMMIT",
        lambda: "ROLLBACK",
        lambda: "END",
        lambda: f"SET lock_timeout = '{ms}ms'",
        lambda: f"SET LOCAL lock_timeout = '{ms}ms'",
        lambda: f"SET TRANSACTION ISOLATION LEVEL {r.choice(PG_LEVELS)}",
        lambda: "SET TRANSACTION READ ONLY",
        lambda: f"SAVEPOINT sp{r.randint(1, 2)}",
        lambda: f"ROLLBACK TO SAVEPOINT sp{r.randint(1, 2)}",
        lambda: f"RELEASE SAVEPOINT sp{r.randint(1, 2)}",
        lambda: f"SELECT id, v FROM {t} ORDER BY id",
        lambda: f"SELECT id, v FROM {t} WHERE id = {k} FOR UPDATE",
        lambda: f"SELECT id FROM {t} WHERE id = {k} FOR UPDATE NOWAIT",
        lambda: f"SELECT id, v FROM {t} ORDER BY id LIMIT {r.randint(1, 3)} FOR UPDATE SKIP LOCKED",
        lambda: f"SELECT id FROM {t} ORDER BY id FETCH FIRST {r.randint(1, 2)} ROWS ONLY FOR SHARE SKIP LOCKED",
        lambda: f"SELECT id FROM {t} ORDER BY id FOR NO KEY UPDATE SKIP LOCKED",
        lambda: f"UPDATE {t} SET v = v + 1 WHERE id = {k}",
        lambda: f"UPDATE {t} SET v = v + 1 WHERE id = {k}",
        lambda: f"INSERT INTO {t} VALUES ({k}, 0)",
        lambda: f"DELETE FROM {t} WHERE id = {k}",
        lambda: "SELECT 1/0",
        lambda: "SELECT * FROM nosuch",
        lambda: "SHOW lock_timeout",
        lambda: "SHOW transaction_isolation",
        lambda: f"SHOW transaction_read_only; SELECT count(*) FROM {t}",
        lambda: f"LOCK TABLE {t} IN ROW EXCLUSIVE MODE NOWAIT",
        lambda: "CREATE TEMP TABLE IF NOT EXISTS scratch (id int)",
        lambda: f"INSERT INTO scratch SELECT id FROM {t} WHERE id = {k}",
    ])


def _my_statement(r: random.Random) -> str:
    t, k = r.choice(TABLES), r.choice((1, 1, 1, 2, 2, 3, 5))
    return _pick(r, [
        lambda: "BEGIN",
        lambda: "START TRANSACTION",
        lambda: "START TRANSACTION READ ONLY",
        lambda: "START TRANSACTION WITH CONSISTENT SNAPSHOT",
        lambda: "COMMIT",
        lambda: "ROLLBACK",
        lambda: "SET SESSION innodb_lock_wait_timeout = 1",
        lambda: f"SET SESSION lock_wait_timeout = {r.randint(1, 3)}",
        lambda: f"SET TRANSACTION ISOLATION LEVEL {r.choice(MY_LEVELS)}",
        lambda: f"SET SESSION TRANSACTION ISOLATION LEVEL {r.choice(MY_LEVELS)}",
        lambda: f"SAVEPOINT sp{r.randint(1, 2)}",
        lambda: f"ROLLBACK TO SAVEPOINT sp{r.randint(1, 2)}",
        lambda: f"RELEASE SAVEPOINT sp{r.randint(1, 2)}",
        lambda: f"SELECT id, v FROM {t} ORDER BY id",
        lambda: f"SELECT id, v FROM {t} WHERE id = {k} FOR UPDATE",
        lambda: f"SELECT id FROM {t} WHERE id = {k} FOR UPDATE NOWAIT",
        lambda: f"SELECT id, v FROM {t} ORDER BY id LIMIT {r.randint(1, 3)} FOR UPDATE SKIP LOCKED",
        lambda: f"SELECT id FROM {t} ORDER BY id LOCK IN SHARE MODE SKIP LOCKED",
        lambda: f"UPDATE {t} SET v = v + 1 WHERE id = {k}",
        lambda: f"UPDATE {t} SET v = v + 1 WHERE id = {k}",
        lambda: f"INSERT INTO {t} VALUES ({k}, 0)",
        lambda: f"DELETE FROM {t} WHERE id = {k}",
        lambda: f"SELECT nosuch FROM {t}",
        lambda: "SELECT * FROM nosuch",
        lambda: "SELECT @@innodb_lock_wait_timeout, @@lock_wait_timeout, @@tx_isolation, @@in_transaction",
        lambda: "SHOW WARNINGS",
        lambda: "SELECT ROW_COUNT()",
        lambda: f"SELECT SQL_CALC_FOUND_ROWS id FROM {t} ORDER BY id LIMIT 1; SELECT FOUND_ROWS()",
        lambda: f"SET autocommit = {r.randint(0, 1)}",
        lambda: f"CREATE TABLE {t} (id int)",  # fails (it exists), after committing the open transaction
        lambda: "CREATE TEMPORARY TABLE IF NOT EXISTS scratch (id int)",
        lambda: f"INSERT INTO scratch SELECT id FROM {t} WHERE id = {k}",
    ])


# how often each kind of statement comes, relative to the others
HEAVY = ("BEGIN", "START TRANSACTION", "FOR UPDATE", "UPDATE", "SKIP LOCKED", "DELETE")


def _pick(r: random.Random, makers) -> str:
    made = [make() for make in makers]
    weights = [3 if any(word in sql for word in HEAVY) else 1 for sql in made]
    return r.choices(made, weights)[0]


def generate(engine: str, seed: int) -> Case:
    r = random.Random(seed)
    first = "SET lock_timeout = '800ms'" if engine == "postgres" else "SET SESSION innodb_lock_wait_timeout = 1"
    steps = [Step(s, first) for s in SESSIONS]
    statement = _pg_statement if engine == "postgres" else _my_statement
    steps += [Step(r.choice(SESSIONS), statement(r)) for _ in range(STEPS)]
    return Case(f"random-{engine}-{seed}", PG_SETUP if engine == "postgres" else MY_SETUP, steps)


def test_the_sequences_are_reproducible():
    assert generate("postgres", 11) == generate("postgres", 11)
    assert generate("mysql", 11) != generate("mysql", 23)


@pytest.mark.parametrize("engine", ["postgres", "mysql"])
@pytest.mark.parametrize("seed", SEEDS)
async def test_witness_random_sequence(seed, engine, backend):
    case = generate(engine, seed)
    assert await compare(backend, case) == [], f"seed {seed}"
