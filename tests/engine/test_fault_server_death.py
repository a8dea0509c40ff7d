"""Fault matrix 2: the server dies mid-race.

This module starts private servers of its own (never the session-wide ones),
kills them with SIGKILL (or shuts them down) while B is blocked behind A, and
checks that every session reports the lost connection, that nothing raises,
and that Race.reconnect() brings every session back once the server has been
restarted -- and fails cleanly while it has not.
"""

from __future__ import annotations

import asyncio

import pytest
from support.waits import eventually
from support.scenarios import accounts

from lockrace.backends import open_backend
from lockrace.core.events import ServerNote, SessionState, StatementFinished
from lockrace.engine.race import Race


LOCK_ROW = "SELECT id FROM accounts WHERE id = 1 FOR UPDATE"
SETUP = accounts(100)


async def fresh_table(backend) -> None:
    """The private servers run with fsync/synchronous_commit off (speed over
    durability), so a killed server may come back without recent commits:
    set the table up again rather than rely on it."""
    await backend.reset_sandbox()
    await backend.run_admin(SETUP)


async def test_server_killed_while_b_is_blocked(own_server):
    backend = await open_backend(own_server)
    await fresh_table(backend)
    race = await Race(backend, ("A", "B", "C")).open()
    events = []
    race.subscribe(events.append)
    try:
        await race.run("A", "BEGIN")
        assert (await race.run("A", LOCK_ROW)).outcome == "ok"
        b = race.submit("B", "UPDATE accounts SET balance = 0 WHERE id = 1")
        assert await race.wait_blocked_or_done(b, 10)
        assert b.blockers == ("A",) and not b.done.is_set()

        await asyncio.to_thread(own_server.server.kill)

        # B's statement ends, classified as a lost connection, not an exception
        await asyncio.wait_for(b.done.wait(), 15)
        assert b.result.outcome == "connection_lost", b.result
        # the engine finds the server gone and marks the idle sessions closed too,
        # without waiting for their next statement (the app shows it on every panel)
        await eventually(lambda: all(s.txn == "closed" for s in race.sessions.values()), timeout=5,
                         fail=False, pause=asyncio.sleep)
        assert {n: s.txn for n, s in race.sessions.items()} == {"A": "closed", "B": "closed", "C": "closed"}
        assert any(isinstance(e, ServerNote) and e.text.startswith("lost the connection to") for e in events)
        # and each of them, used again, reports the lost connection; none raises
        for name in ("A", "C"):
            res = await asyncio.wait_for(race.run(name, "SELECT 1"), 15)
            assert res.outcome == "connection_lost", (name, res)
        assert {n: s.txn for n, s in race.sessions.items()} == {"A": "closed", "B": "closed", "C": "closed"}
        assert all(not s.busy for s in race.sessions.values())
        closed_states = {e.session for e in events if isinstance(e, SessionState) and e.txn == "closed"}
        assert closed_states == {"A", "B", "C"}
        lost = {e.session for e in events if isinstance(e, StatementFinished) and e.result.outcome == "connection_lost"}
        assert lost == {"A", "B", "C"}
        # a closed session answers at once, still without raising
        again = await asyncio.wait_for(race.run("C", "SELECT 1"), 5)
        assert again.outcome == "connection_lost"

        # the monitor's failure is reported once as a note, the watcher keeps going
        assert race._watcher is not None and not race._watcher.done()

        await asyncio.to_thread(own_server.server.restart)
        await asyncio.wait_for(race.reconnect(), 20)
        assert any(isinstance(e, ServerNote) and e.text.startswith("reconnected to") for e in events)
        assert set(race.sessions) == {"A", "B", "C"}
        await fresh_table(backend)
        for name, session in race.sessions.items():
            assert session.txn == "idle"
            res = await race.run(name, "SELECT balance FROM accounts WHERE id = 1")
            assert res.outcome == "ok", (name, res)
            assert res.rows == [("100",)]
        # and races work again: A locks, B is reported blocked by A, A commits, B proceeds
        await race.run("A", "BEGIN")
        await race.run("A", LOCK_ROW)
        b = race.submit("B", "UPDATE accounts SET balance = 1 WHERE id = 1")
        assert await race.wait_blocked_or_done(b, 10)
        assert b.blockers == ("A",)
        await race.run("A", "COMMIT")
        await asyncio.wait_for(b.done.wait(), 10)
        assert b.result.outcome == "ok"
    finally:
        await asyncio.wait_for(race.close(), 20)


async def test_server_stopped_cleanly_mid_race(own_server):
    """A clean shutdown (PG fast shutdown / mariadbd SIGTERM) while B waits.

    The server decides the order in which it ends connections: MariaDB may end
    A first, which releases the row so that B's update completes just before
    B's own connection goes.  Either way B ends as ``ok`` or
    ``connection_lost`` -- never an exception -- and A's uncommitted update
    is rolled back by the server.
    """
    backend = await open_backend(own_server)
    await fresh_table(backend)
    race = await Race(backend, ("A", "B")).open()
    try:
        await race.run("A", "BEGIN")
        assert (await race.run("A", "UPDATE accounts SET balance = 500 WHERE id = 1")).outcome == "ok"
        b = race.submit("B", "UPDATE accounts SET balance = balance + 1 WHERE id = 1")
        assert await race.wait_blocked_or_done(b, 10)
        server = own_server.server
        # stop the process but keep its data directory, so that it can restart
        await asyncio.to_thread(lambda: (server.proc.send_signal(server.stop_signal), server.proc.wait(20)))
        await asyncio.wait_for(b.done.wait(), 15)
        assert b.result.outcome in ("connection_lost", "ok"), b.result
        assert (await asyncio.wait_for(race.run("A", "COMMIT"), 15)).outcome == "connection_lost"
        assert race.sessions["A"].txn == "closed"
        await asyncio.to_thread(server.restart)
        await asyncio.wait_for(race.reconnect(), 20)
        rows = (await race.run("B", "SELECT balance FROM accounts")).rows
        assert rows == [("101",)] if b.result.outcome == "ok" else [("100",)]
    finally:
        await asyncio.wait_for(race.close(), 20)


async def test_one_backend_killed_leaves_the_others_alone(engine, backend, make_race):
    """Only A's connection is ended by the server (an admin's kill): A reports
    connection_lost, B and C stay connected and usable -- the server is up."""
    race = await make_race(backend, ("A", "B", "C"))
    events = []
    race.subscribe(events.append)
    await race.run("A", "SELECT 1")
    assert await race.monitor.terminate(race.sessions["A"].ident)
    res = await asyncio.wait_for(race.run("A", "SELECT 1"), 10)
    assert res.outcome == "connection_lost", res
    await asyncio.sleep(0.3)  # room for the engine's probe of the server
    assert race.sessions["A"].txn == "closed"
    assert race.sessions["B"].txn == "idle" and race.sessions["C"].txn == "idle"
    assert not any(isinstance(e, ServerNote) and e.text.startswith("lost the connection") for e in events)
    for name in ("B", "C"):
        assert (await race.run(name, "SELECT 2")).rows == [("2",)]


async def test_reconnect_while_the_server_is_still_down(own_server):
    """Reconnecting too early fails with one clear error and leaves the race as it
    was (every session there, closed, answering connection_lost); a later
    reconnect, once the server is back, works."""
    from lockrace.backends import ConnectError

    backend = await open_backend(own_server)
    await fresh_table(backend)
    race = await Race(backend, ("A", "B")).open()
    try:
        await asyncio.to_thread(own_server.server.kill)
        assert (await asyncio.wait_for(race.run("A", "SELECT 1"), 15)).outcome == "connection_lost"
        with pytest.raises(ConnectError) as err:
            await asyncio.wait_for(race.reconnect(), 15)
        assert str(err.value).startswith("cannot connect to ")
        assert set(race.sessions) == {"A", "B"}
        for name in ("A", "B"):
            res = await asyncio.wait_for(race.run(name, "SELECT 1"), 5)
            assert res.outcome == "connection_lost", (name, res)
            assert race.sessions[name].txn == "closed"
        await race.cancel("A")  # nothing running: no error either
        await asyncio.to_thread(own_server.server.restart)
        await asyncio.wait_for(race.reconnect(), 20)
        await fresh_table(backend)
        assert (await race.run("B", "SELECT count(*) FROM accounts")).rows == [("1",)]
    finally:
        await asyncio.wait_for(race.close(), 20)


async def test_close_right_after_the_server_died(own_server):
    """Quitting with a dead server: close() returns promptly and raises nothing."""
    backend = await open_backend(own_server)
    await fresh_table(backend)
    race = await Race(backend, ("A", "B", "C")).open()
    await race.run("A", "BEGIN")
    await race.run("A", LOCK_ROW)
    b = race.submit("B", "UPDATE accounts SET balance = 0 WHERE id = 1")
    assert await race.wait_blocked_or_done(b, 10)
    await asyncio.to_thread(own_server.server.kill)
    t0 = asyncio.get_running_loop().time()
    await asyncio.wait_for(race.close(), 10)
    assert asyncio.get_running_loop().time() - t0 < 3
    assert b.done.is_set() and b.result.outcome in ("connection_lost", "cancelled")
