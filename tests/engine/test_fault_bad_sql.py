"""Fault matrix 1: bad SQL.

The server's error comes back with its code (SQLSTATE / errno) and exact
message, is rendered the way psql / mysql would show it, and the session
stays usable.  In an explicit PostgreSQL transaction the session's state is
"failed transaction" until ROLLBACK; MariaDB has no such state (an error
rolls back only the statement), which the test pins down too.
"""

from __future__ import annotations

from lockrace.core.events import SessionState
from lockrace.render.tables import result_lines


async def test_pg_syntax_error_is_shown_with_its_code_and_session_stays_usable(pg_backend, make_race):
    race = await make_race(pg_backend, ("A",))
    res = await race.run("A", "SELEC 1")
    assert res.outcome == "error"
    assert res.code == "42601"
    assert res.message == 'syntax error at or near "SELEC"'
    assert result_lines(res, "postgres") == ['ERROR: 42601: syntax error at or near "SELEC"']
    assert race.sessions["A"].txn == "idle"

    res = await race.run("A", "SELECT * FROM no_such_table")
    assert (res.outcome, res.code) == ("error", "42P01")
    assert res.message == 'relation "no_such_table" does not exist'

    ok = await race.run("A", "SELECT 41 + 1 AS answer")
    assert ok.outcome == "ok" and ok.rows == [("42",)]


async def test_pg_failed_transaction_until_rollback(pg_backend, make_race):
    race = await make_race(pg_backend, ("A",))
    states: list[str] = []
    race.subscribe(lambda ev: states.append(ev.txn) if isinstance(ev, SessionState) and ev.session == "A" else None)

    assert (await race.run("A", "BEGIN")).outcome == "ok"
    assert race.sessions["A"].txn == "in transaction"
    bad = await race.run("A", "SELECT 1/0")
    assert (bad.outcome, bad.code, bad.message) == ("error", "22012", "division by zero")
    assert race.sessions["A"].txn == "failed transaction"

    # every further statement is refused by the server while the transaction is failed
    refused = await race.run("A", "SELECT 1")
    assert (refused.outcome, refused.code) == ("error", "25P02")
    assert refused.message.startswith("current transaction is aborted")
    assert race.sessions["A"].txn == "failed transaction"

    rb = await race.run("A", "ROLLBACK")
    assert (rb.outcome, rb.tag) == ("ok", "ROLLBACK")
    assert race.sessions["A"].txn == "idle"
    assert (await race.run("A", "SELECT 1")).rows == [("1",)]
    # listeners (the app's panels) saw the same sequence of states (an answer the
    # caller had at once reaches them on the loop's next turn)
    await race.settled("A")
    assert states[-4:] == ["failed transaction", "failed transaction", "idle", "idle"]
    assert "in transaction" in states


async def test_pg_bad_sql_in_transaction_keeps_budgets_readable_after_rollback(pg_backend, make_race):
    race = await make_race(pg_backend, ("A",))
    await race.run("A", "SET lock_timeout = '250ms'")
    await race.run("A", "BEGIN")
    await race.run("A", "SELEC")
    assert race.sessions["A"].txn == "failed transaction"
    await race.run("A", "ROLLBACK")
    budgets = {b.name: b.ms for b in race.sessions["A"].budgets}
    assert budgets["lock_timeout"] == 250.0


async def test_mariadb_syntax_error_is_shown_with_its_code_and_session_stays_usable(mysql_backend, make_race):
    race = await make_race(mysql_backend, ("A",))
    res = await race.run("A", "SELEC 1")
    assert res.outcome == "error"
    assert res.code == "1064"
    assert res.sqlstate == "42000"
    assert "You have an error in your SQL syntax" in res.message
    assert result_lines(res, mysql_backend.flavor)[0].startswith("ERROR 1064 (42000): You have an error in your SQL syntax")

    res = await race.run("A", "SELECT * FROM no_such_table")
    assert (res.outcome, res.code, res.sqlstate) == ("error", "1146", "42S02")
    assert res.message == f"Table '{mysql_backend.sandbox}.no_such_table' doesn't exist"

    ok = await race.run("A", "SELECT 41 + 1 AS answer")
    assert ok.outcome == "ok" and ok.rows == [("42",)]


async def test_mariadb_error_in_transaction_rolls_back_only_the_statement(mysql_backend, make_race):
    race = await make_race(mysql_backend, ("A",))
    await race.run("A", "CREATE TABLE t (id int PRIMARY KEY) ENGINE=InnoDB")
    await race.run("A", "BEGIN")
    await race.run("A", "INSERT INTO t VALUES (1)")
    dup = await race.run("A", "INSERT INTO t VALUES (1)")
    assert (dup.outcome, dup.code) == ("error", "1062")
    # no "failed transaction" on MariaDB: the transaction is still open and usable
    assert race.sessions["A"].txn == "in transaction"
    assert (await race.run("A", "SELECT count(*) FROM t")).rows == [("1",)]
    await race.run("A", "ROLLBACK")
    assert race.sessions["A"].txn == "idle"
    assert (await race.run("A", "SELECT count(*) FROM t")).rows == [("0",)]


async def test_sql_with_a_nul_byte_is_not_sent(pg_backend, mysql_backend, make_race):
    """libpq ends the SQL at a NUL: sent as is, ``DELETE FROM t\\0 WHERE id = 1``
    runs as ``DELETE FROM t`` on PostgreSQL.  lockrace refuses to send it (on
    both engines, the same way), every row stays, the session stays usable."""
    for backend in (pg_backend, mysql_backend):
        race = await make_race(backend, ("A",))
        assert (await race.run("A", "CREATE TABLE t (id int PRIMARY KEY)")).outcome == "ok"
        assert (await race.run("A", "INSERT INTO t VALUES (1), (2), (3)")).outcome == "ok"
        res = await race.run("A", "DELETE FROM t\x00 WHERE id = 1")
        assert res.outcome == "error" and "NUL byte" in res.message, (backend.flavor, res)
        after = await race.run("A", "SELECT count(*) FROM t")
        assert after.outcome == "ok" and after.rows == [("3",)], (backend.flavor, after)
        assert race.sessions["A"].txn == "idle"
