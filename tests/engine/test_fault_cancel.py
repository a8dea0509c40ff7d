"""Fault matrix 4: a statement that never finishes can be cancelled.

Engine: Race.cancel() ends a long sleep and a lock wait with no budget, the
server reports the cancellation (57014 / 1317) and the session is usable
afterwards.  CLI: ``lockrace run --step-timeout 1`` cancels such a step, exits 1
and names the step.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from support.flavor import private_mysql_flavor
from support.cli import lockrace_env, run_lockrace
from support.server_view import sleeping, target_connect
from support.waits import eventually

# (MySQL's SLEEP() alone in a statement answers 1 when interrupted, not an error: as part
# of a WHERE clause it is interrupted with 1317 on MySQL and MariaDB alike)
SLEEP = {"postgres": "SELECT pg_sleep(60)", "mysql": "SELECT 1 FROM DUAL WHERE SLEEP(60) = 0"}
NO_BUDGET = {
    "postgres": ["SET lock_timeout = 0", "SET statement_timeout = 0"],
    # each clamps this to its maximum (MariaDB 10^8 s, MySQL 2^30 s): no budget in practice
    "mariadb": ["SET SESSION innodb_lock_wait_timeout = 1073741824", "SET SESSION max_statement_time = 0"],
    "mysql8": ["SET SESSION innodb_lock_wait_timeout = 1073741824", "SET SESSION max_execution_time = 0"],
}


async def _sleep_running(engine: str, backend) -> None:
    """Until the server itself reports the sleep running (then a cancel has something to cancel)."""
    await eventually(lambda: sleeping(engine, target_connect(backend.target)), timeout=10,
                     what="the sleep to run on the server", pause=asyncio.sleep)


async def test_cancel_a_long_sleep(engine, backend, make_race):
    race = await make_race(backend, ("A",))
    stmt = race.submit("A", SLEEP[engine])
    await _sleep_running(engine, backend)
    assert not stmt.done.is_set()
    t0 = time.monotonic()
    assert await race.cancel("A")
    await asyncio.wait_for(stmt.done.wait(), 5)
    assert time.monotonic() - t0 < 2
    res = stmt.result
    if engine == "postgres":
        assert (res.outcome, res.code, res.message) == ("cancelled", "57014", "canceling statement due to user request")
    else:
        assert (res.outcome, res.code, res.message) == ("cancelled", "1317", "Query execution was interrupted")
    assert not race.sessions["A"].busy
    assert (await race.run("A", "SELECT 7")).rows == [("7",)]
    if backend.flavor == "mysql8":
        # MySQL: a statement that is only SLEEP() ends normally when interrupted, answering 1
        stmt = race.submit("A", "SELECT SLEEP(60)")
        await _sleep_running(engine, backend)
        assert await race.cancel("A")
        await asyncio.wait_for(stmt.done.wait(), 5)
        assert (stmt.result.outcome, stmt.result.rows) == ("ok", [("1",)]), stmt.result


async def test_cancel_a_lock_wait_with_no_budget(engine, backend, make_race):
    race = await make_race(backend, ("A", "B"))
    await backend.run_admin(["CREATE TABLE jobs (id int PRIMARY KEY, state varchar(10))", "INSERT INTO jobs VALUES (1, 'new')"])
    for sql in NO_BUDGET[backend.flavor]:
        assert (await race.run("B", sql)).outcome == "ok"
    await race.run("A", "BEGIN")
    await race.run("A", "UPDATE jobs SET state = 'a' WHERE id = 1")
    b = race.submit("B", "UPDATE jobs SET state = 'b' WHERE id = 1")
    assert await race.wait_blocked_or_done(b, 10)
    # nothing would ever end this wait (MariaDB has no "unlimited"; it clamps to 10^8 s, three years)
    assert b.budget is None if engine == "postgres" else b.budget.ms >= 1e11
    assert b.blockers == ("A",)
    assert await race.cancel("B")
    await asyncio.wait_for(b.done.wait(), 5)
    assert b.result.outcome == "cancelled", b.result
    assert b.result.code == ("57014" if engine == "postgres" else "1317")
    assert race.sessions["B"].txn == "idle"
    # A still holds its row; once it commits, B's retry goes through
    await race.run("A", "COMMIT")
    assert (await race.run("B", "UPDATE jobs SET state = 'b' WHERE id = 1")).outcome == "ok"


async def test_cancel_with_nothing_running_is_a_no_op(engine, backend, make_race):
    race = await make_race(backend, ("A",))
    assert await race.cancel("A") is False
    assert (await race.run("A", "SELECT 1")).outcome == "ok"


def _flavor() -> str:
    """The private MySQL-family server's flavor as scenarios name it."""
    return "mysql8" if private_mysql_flavor() == "mysql" else "mariadb"


def _scenario(engine: str) -> str:
    sleep = SLEEP[engine]
    no_budget = "\n".join(f"B> {s};" for s in NO_BUDGET["postgres" if engine == "postgres" else _flavor()])
    return f"""title: never finishes
engines: {engine}
setup:
    CREATE TABLE jobs (id int PRIMARY KEY, state varchar(10));
    INSERT INTO jobs VALUES (1, 'new');

A> BEGIN;
A> UPDATE jobs SET state = 'a' WHERE id = 1;
{no_budget}
B> UPDATE jobs SET state = 'b' WHERE id = 1;
C> {sleep};
A> COMMIT;
"""


@pytest.mark.parametrize("engine", ["postgres", "mysql"])
def test_run_step_timeout_cancels_and_names_the_step(engine, tmp_path, pg_server, mysql_server):
    path = tmp_path / "never.race"
    path.write_text(_scenario(engine))
    # the tests' private servers, given as DSNs (saves starting another server per run)
    if engine == "postgres":
        flags = ["--pg", pg_server.conninfo]
    else:
        flags = ["--mysql", f"mysql://root@localhost/?unix_socket={mysql_server.mysql_kwargs['unix_socket']}"]
    t0 = time.monotonic()
    out = run_lockrace(["run", str(path), "--step-timeout", "1", *flags],
                       lockrace_env(LOCKRACE_SANDBOX="lockrace_fault_cancel"), timeout=60)
    took = time.monotonic() - t0
    assert out.returncode == 1, out.stdout + out.stderr
    assert "Traceback" not in out.stdout + out.stderr
    # B's wait (no budget) and C's sleep were both cancelled after a second, and named
    assert "step 5 (B): did not finish within 1 s (blocked by A); cancelled" in out.stdout, out.stdout
    if engine == "postgres":
        assert "step 6 (C): did not finish within 1 s; cancelled" in out.stdout, out.stdout
        assert "ERROR: 57014: canceling statement due to user request" in out.stdout
    else:
        assert "ERROR 1317 (70100): Query execution was interrupted" in out.stdout
    # A's COMMIT still ran after the cancellations
    assert out.stdout.count("A> COMMIT;") == 1
    assert took < 15, f"took {took:.1f} s"
