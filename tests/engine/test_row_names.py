"""A waited-on row is named by its primary key (``accounts id=1``), read on the
monitor at the ctid pg_locks reports; a table without a key keeps the ctid.
Real PostgreSQL: the holder UPDATEs the row first, so its ctid is no longer the
one the table was loaded with."""

from __future__ import annotations

from lockrace.core.events import StatementBlocked


async def blocked_lock(race, holder_sql: list[str], waiter_sql: str):
    for sql in ["BEGIN;", *holder_sql]:
        res = await race.run("A", sql)
        assert res.outcome == "ok", res.message
    seen = []
    race.subscribe(lambda e: seen.append(e) if isinstance(e, StatementBlocked) else None)
    stmt = race.submit("B", waiter_sql)
    assert await race.wait_blocked_or_done(stmt, 10)
    await race.run("A", "COMMIT;")
    await stmt.done.wait()
    assert stmt.result.outcome == "ok", stmt.result.message
    return seen[-1].lock, stmt.result


async def test_row_named_by_primary_key_after_an_update(pg_backend, make_race):
    race = await make_race(pg_backend, ("A", "B"))
    await pg_backend.run_admin(["CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL);"
                                "INSERT INTO accounts VALUES (1, 100), (2, 100), (3, 100);"])
    lock, result = await blocked_lock(race, ["UPDATE accounts SET balance = 1 WHERE id = 2;",
                                             "UPDATE accounts SET balance = 2 WHERE id = 2;"],
                                      "UPDATE accounts SET balance = 3 WHERE id = 2;")
    assert lock.relation == "accounts" and lock.detail == "id=2"
    assert lock.describe() == "accounts id=2 ShareLock"
    assert result.lock.describe() == "accounts id=2 ShareLock"


async def test_composite_text_key_is_quoted(pg_backend, make_race):
    race = await make_race(pg_backend, ("A", "B"))
    await pg_backend.run_admin(["CREATE TABLE lines (region text, n int, qty int, PRIMARY KEY (region, n));"
                                "INSERT INTO lines VALUES ('it''s', 1, 0), ('eu', 2, 0);"])
    lock, _ = await blocked_lock(race, ["UPDATE lines SET qty = 1 WHERE n = 1;"],
                                 "SELECT * FROM lines WHERE n = 1 FOR UPDATE;")
    assert lock.detail == "region='it''s', n=1"


async def test_table_without_key_keeps_the_ctid(pg_backend, make_race):
    race = await make_race(pg_backend, ("A", "B"))
    await pg_backend.run_admin(["CREATE TABLE heap (v int); INSERT INTO heap VALUES (1), (2);"])
    lock, _ = await blocked_lock(race, ["SELECT v FROM heap WHERE v = 2 FOR UPDATE;"],
                                 "DELETE FROM heap WHERE v = 2;")
    assert lock.describe() == "heap row (0,2) ShareLock"


async def test_naming_a_row_is_bounded_behind_a_queued_table_lock(pg_backend, make_race):
    """C queues ACCESS EXCLUSIVE behind A: reading the table to name a row would queue
    behind C; the monitor gives up after its 50 ms lock_timeout and keeps the ctid."""
    import time

    race = await make_race(pg_backend, ("A", "C"))
    await pg_backend.run_admin(["CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL);"
                                "INSERT INTO accounts VALUES (1, 100);"])
    assert (await race.run("A", "BEGIN;")).outcome == "ok"
    assert (await race.run("A", "SELECT * FROM accounts;")).outcome == "ok"
    assert (await race.run("C", "BEGIN;")).outcome == "ok"
    stmt = race.submit("C", "LOCK TABLE accounts IN ACCESS EXCLUSIVE MODE;")
    assert await race.wait_blocked_or_done(stmt, 10)
    t0 = time.perf_counter()
    name = await race.monitor._row_name(-1, "accounts", 0, 1)
    took = time.perf_counter() - t0
    assert name == "0,1" and took < 1.0
    assert (await race.monitor.waits([race.sessions["C"].ident]))  # the monitor still answers
    await race.run("A", "COMMIT;")
    await stmt.done.wait()
    await race.run("C", "ROLLBACK;")
    assert await race.monitor._row_name(-2, "accounts", 0, 1) == "id=1"  # unqueued: named by its key
