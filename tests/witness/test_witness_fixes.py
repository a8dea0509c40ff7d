"""Differences the witness harness found between lockrace and a raw client, each
pinned by a focused test (the harness's cases show them too)."""

from __future__ import annotations

import asyncio

import pymysql
import pytest


def _routines(backend) -> list[tuple]:
    conn = pymysql.connect(**backend.target.mysql_kwargs, autocommit=True)
    try:
        cur = conn.cursor()
        cur.execute("SELECT ROUTINE_TYPE, ROUTINE_NAME FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = %s"
                    " ORDER BY 2", (backend.sandbox,))
        return list(cur.fetchall())
    finally:
        conn.close()


@pytest.mark.parametrize("engine", ["mysql"])
async def test_fresh_sandbox_has_no_stored_routines_left(engine, backend):
    """A scenario whose setup creates a stored function ran once per server: the
    fresh sandbox of the next run still had it (1304 FUNCTION already exists)."""
    setup = ["CREATE FUNCTION claim(i int) RETURNS int DETERMINISTIC RETURN i + 1",
             "CREATE PROCEDURE `odd``name`() SELECT 1"]
    await backend.reset_sandbox()
    await backend.run_admin(setup)
    assert len(await asyncio.to_thread(_routines, backend)) == 2
    await backend.reset_sandbox()
    assert await asyncio.to_thread(_routines, backend) == []
    await backend.run_admin(setup)  # the same setup again, as the next run does
    await backend.reset_sandbox()


@pytest.mark.mariadb_only  # written with MariaDB's SQL (sequences, @@in_transaction, seq_1_to_N, NEXTVAL)
@pytest.mark.parametrize("engine", ["mysql"])
async def test_a_select_that_begins_a_transaction_shows_it(engine, backend, make_race):
    """With autocommit off a SELECT begins a transaction; the server says so in the
    status flags of the EOF packet that ends its rows, which PyMySQL does not keep:
    lockrace showed the session idle while it held a transaction (and its snapshot)."""
    race = await make_race(backend, names=("A",))
    await backend.run_admin(["CREATE TABLE jobs (id int PRIMARY KEY) ENGINE=InnoDB", "INSERT INTO jobs VALUES (1)"])
    session = race.sessions["A"]
    assert (await race.run("A", "SET autocommit = 0")).outcome == "ok"
    await race.settled("A")
    assert session.txn == "idle"
    for _ in range(2):  # once on the thread's way, once (a short answer) on the loop's
        result = await race.run("A", "SELECT id FROM jobs")
        await race.settled("A")
        assert result.rows == [("1",)]
        assert session.txn == "in transaction"
    rows = (await race.run("A", "SELECT @@in_transaction")).rows
    await race.settled("A")
    assert rows == [("1",)] and session.txn == "in transaction"
    await race.run("A", "COMMIT")
    await race.settled("A")
    assert session.txn == "idle"
    big = await race.run("A", "SELECT seq FROM jobs, seq_1_to_3000")  # rows beyond the kept ones are only counted
    await race.settled("A")
    assert big.row_count == 3000 and session.txn == "in transaction"


@pytest.mark.mariadb_only  # written with MariaDB's SQL (sequences, @@in_transaction, seq_1_to_N, NEXTVAL)
@pytest.mark.parametrize("engine", ["mysql"])
async def test_a_failed_ddl_has_committed_the_transaction(engine, backend, make_race):
    """A statement that commits implicitly commits the open transaction before it runs,
    so also when it then fails (a table that exists, one that does not): lockrace
    went on showing the transaction open.  One that does not parse commits nothing,
    nor does CREATE TEMPORARY TABLE."""
    race = await make_race(backend, names=("A",))
    await backend.run_admin(["CREATE TABLE jobs (id int PRIMARY KEY) ENGINE=InnoDB"])
    session = race.sessions["A"]

    async def run(sql):
        result = await race.run("A", sql)
        await race.settled("A")
        return result

    cases = [("CREATE TABLE jobs (id int)", "1050", "idle"), ("DROP TABLE nosuch", "1051", "idle"),
             ("SELECT 1; ALTER TABLE nosuch ADD x int", "1146", "idle"), ("CREATE TABLEE x", "1064", "in transaction"),
             ("CREATE TEMPORARY TABLE jobs (id int); CREATE TEMPORARY TABLE jobs (id int)", "1050", "in transaction"),
             ("SELECT * FROM nosuch", "1146", "in transaction")]
    for sql, code, state in cases:
        await run("BEGIN")
        await run("INSERT INTO jobs VALUES (1)")
        assert (await run(sql)).code == code, sql
        assert session.txn == state, sql
        truth = (await run("SELECT @@in_transaction")).rows
        assert truth == [("1",) if state == "in transaction" else ("0",)], sql
        await run("ROLLBACK")
        await run("DROP TEMPORARY TABLE IF EXISTS jobs")
        await run("DELETE FROM jobs")
