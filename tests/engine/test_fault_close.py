"""Fault matrix 3 (engine part): Race.close() while three sessions are blocked.

Statements are cancelled, transactions rolled back, connections closed, and
afterwards the server itself shows no connection of lockrace's left
(pg_stat_activity / the MariaDB processlist, read on a separate connection).
"""

from __future__ import annotations

import asyncio
import time

from support.server_view import lockrace_backends, mysql_connect, pg_connect, wait_until_gone
from support.scenarios import accounts

from lockrace.core.events import StatementFinished


async def _three_blocked(race):
    await race.backend.run_admin(accounts(100, 100))
    await race.run("A", "BEGIN")
    assert (await race.run("A", "UPDATE accounts SET balance = 999 WHERE id = 1")).outcome == "ok"
    stmts = {}
    for name in ("B", "C", "D"):
        await race.run(name, "BEGIN")
        # each waiter also changes another row first: a rollback must undo it
        if name == "B":
            await race.run(name, "UPDATE accounts SET balance = 555 WHERE id = 2")
        stmts[name] = race.submit(name, "UPDATE accounts SET balance = balance + 1 WHERE id = 1")
    for name, stmt in stmts.items():
        assert await race.wait_blocked_or_done(stmt, 10), name
        assert not stmt.done.is_set(), (name, stmt.result)
    return stmts


def _balances(target, sandbox):
    if target.family == "postgres":
        with pg_connect(target) as conn:
            return conn.execute(f"SELECT id, balance FROM {sandbox}.accounts ORDER BY id").fetchall()
    conn = mysql_connect(target)
    try:
        cur = conn.cursor()
        cur.execute(f"SELECT id, balance FROM `{sandbox}`.accounts ORDER BY id")
        return [tuple(r) for r in cur.fetchall()]
    finally:
        conn.close()


async def test_close_with_three_blocked_sessions(engine, backend, make_race, pg_server, mysql_server):
    target = pg_server if engine == "postgres" else mysql_server
    race = await make_race(backend)
    finished = []
    race.subscribe(lambda ev: finished.append(ev) if isinstance(ev, StatementFinished) else None)
    stmts = await _three_blocked(race)
    idents = [s.ident for s in race.sessions.values()]
    assert len(await asyncio.to_thread(lockrace_backends, target, idents)) >= (5 if engine == "postgres" else 4)

    t0 = time.monotonic()
    await race.close()
    took = time.monotonic() - t0
    assert took < 3.0, f"close took {took:.1f} s"

    # the blocked statements were cancelled by the server, not left to run
    for name, stmt in stmts.items():
        assert stmt.done.is_set(), name
        assert stmt.result.outcome == "cancelled", (name, stmt.result)
        assert stmt.result.code in ("57014", "1317"), (name, stmt.result)
    assert {e.session for e in finished if e.result.outcome == "cancelled"} == {"B", "C", "D"}
    # every connection is gone from the server's own view
    assert await asyncio.to_thread(wait_until_gone, target, idents) == []
    # every transaction was rolled back: neither A's nor B's update survived
    assert await asyncio.to_thread(_balances, target, backend.sandbox) in ([(1, 100), (2, 100)], [("1", "100"), ("2", "100")])


async def test_close_is_idempotent_and_safe_after_server_side_kill(engine, backend, make_race, pg_server, mysql_server):
    """A session whose connection the server already ended: close() still
    finishes promptly and leaves nothing behind."""
    target = pg_server if engine == "postgres" else mysql_server
    race = await make_race(backend, ("A", "B"))
    await race.run("A", "BEGIN")
    await race.run("A", "SELECT 1")
    victim = race.sessions["A"].ident
    assert await race.monitor.terminate(victim)
    idents = [s.ident for s in race.sessions.values()]
    t0 = time.monotonic()
    await race.close()
    await race.close()  # a second close is harmless
    assert time.monotonic() - t0 < 3.0
    assert await asyncio.to_thread(wait_until_gone, target, idents) == []


async def test_monitor_stays_usable_when_a_poll_is_cancelled_mid_query(mysql_backend, make_race):
    """Race.close() cancels the watcher, then sends KILL QUERY on the same monitor
    connection.  PyMySQL runs the watcher's query in a worker thread that goes on
    after the cancel; the KILL must wait for it, or the two interleave packets and
    break the connection (found by the SIGTERM test: 1 run in ~7 took 6 s to exit)."""
    race = await make_race(mysql_backend, ("A", "B"))
    await mysql_backend.run_admin(["CREATE TABLE accounts (id int PRIMARY KEY)", "INSERT INTO accounts VALUES (1)"])
    await race.run("A", "BEGIN")
    await race.run("A", "SELECT id FROM accounts WHERE id = 1 FOR UPDATE")
    b = race.submit("B", "UPDATE accounts SET id = 2 WHERE id = 1")
    assert await race.wait_blocked_or_done(b, 10)
    poll = asyncio.create_task(race.monitor.run_query("SELECT SLEEP(0.3)"))  # a slow poll, in flight
    await asyncio.sleep(0.05)
    poll.cancel()
    assert await race.monitor.cancel(race.sessions["B"].ident) is True
    await asyncio.wait_for(b.done.wait(), 5)
    assert (b.result.outcome, b.result.code) == ("cancelled", "1317")
    assert (await race.monitor.waits([race.sessions["A"].ident])) == {}


async def test_close_cancelled_twice_still_closes_every_connection(engine, backend, make_race, pg_server,
                                                                   mysql_server):
    """A screen torn down cancels its worker, and cancels it again while the race
    closes (the app's race lab, left with Esc): the close still ends, and leaves
    no connection of lockrace's on the server."""
    target = pg_server if engine == "postgres" else mysql_server
    race = await make_race(backend, ("A", "B"))
    await race.run("A", "BEGIN")
    await race.run("B", "BEGIN")
    await race.run("A", "SELECT 1")
    # B still runs a statement: the close cancels it through the server and waits for it
    race.submit("B", "SELECT pg_sleep(5)" if engine == "postgres" else "SELECT SLEEP(5)")
    idents = [s.ident for s in race.sessions.values()]
    closing = asyncio.ensure_future(race.close())
    # into the close's first step (turns of the loop, not time: a close on a fast
    # server took under 2 ms once its answers were read on the loop; it takes many
    # round trips to the server, so it cannot end within these turns)
    for _ in range(2):
        await asyncio.sleep(0)
    closing.cancel()
    await asyncio.sleep(0)  # the close takes the first cancel in...
    assert not closing.done()
    closing.cancel()  # ...and is cancelled again while it is at it
    try:
        await closing
    except asyncio.CancelledError:
        pass
    assert closing.cancelled()  # the cancel is not lost: it is raised once the close is done
    assert all(s.conn.closed for s in race.sessions.values())
    assert await asyncio.to_thread(wait_until_gone, target, idents) == []
