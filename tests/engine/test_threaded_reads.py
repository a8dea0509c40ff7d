"""Threaded reads (LOCKRACE_READS=threaded, Backend.reads): no answer is read on
the event loop, every statement is one blocking driver call on the session's
own thread; a refusal, a lock wait timeout, a wait that ends when its holder
lets go and a deadlock come out the same as with the loop's fast path (real
PostgreSQL and MariaDB)."""

from __future__ import annotations

import asyncio

import pytest

from lockrace.backends.base import reads_from_env


def _timeout_sql(backend) -> str:
    return "SET lock_timeout = '300ms'" if backend.family == "postgres" else "SET SESSION innodb_lock_wait_timeout = 1"


def _nowait(backend) -> str:
    return "SELECT id FROM rows_r WHERE id = 1 FOR UPDATE NOWAIT"


async def _four_races(backend, make_race) -> tuple[list, list]:
    """The outcomes of the four races, and the names of what each session's thread was asked to do."""
    race = await make_race(backend, ("A", "B"))
    await backend.run_admin(["CREATE TABLE rows_r (id int PRIMARY KEY, v int)",
                             "INSERT INTO rows_r VALUES (1, 0), (2, 0)"])
    calls: list[str] = []
    for name in ("A", "B"):
        worker = race.sessions[name].conn.thread()
        submit = worker.submit

        def counted(fn, *args, submit=submit):
            calls.append(fn.__name__)
            return submit(fn, *args)

        worker.submit = counted
    outcomes = []
    lock = "SELECT id FROM rows_r WHERE id = {} FOR UPDATE"
    # a NOWAIT refusal
    await race.run("A", "BEGIN")
    await race.run("A", lock.format(1))
    outcomes.append(("nowait", (await race.run("B", _nowait(backend))).outcome))
    await race.settled("B")
    # a lock wait timeout
    await race.run("B", _timeout_sql(backend))
    timed = await race.run("B", lock.format(1))
    outcomes.append(("timeout", timed.outcome, timed.elapsed_ns >= 250e6))
    await race.settled("B")
    # blocked, then released by the holder's commit
    await race.run("B", "SET lock_timeout = 0" if backend.family == "postgres"
                   else "SET SESSION innodb_lock_wait_timeout = 50")
    waiting = race.submit("B", lock.format(1))
    assert await race.wait_blocked_or_done(waiting, 10)
    blocked = waiting.result is None and waiting.blocked_since is not None
    await race.run("A", "COMMIT")
    await waiting.done.wait()
    outcomes.append(("released", blocked, waiting.result.outcome, waiting.result.blocked_by))
    await race.settled("B")
    # a deadlock: A holds 1 and wants 2, B holds 2 and wants 1
    await race.run("A", "BEGIN")
    await race.run("B", "BEGIN")
    await race.run("A", lock.format(1))
    await race.run("B", lock.format(2))
    first = race.submit("A", lock.format(2))
    assert await race.wait_blocked_or_done(first, 10)
    second = await race.run("B", lock.format(1))
    await first.done.wait()
    got = sorted([first.result.outcome, second.outcome])
    outcomes.append(("deadlock", got))
    for name in ("A", "B"):
        await race.settled(name)
        await race.run(name, "ROLLBACK")
    return outcomes, calls


@pytest.mark.parametrize("engine", ["postgres", "mysql"])
async def test_threaded_reads_give_the_same_outcomes(backend, make_race, monkeypatch):
    monkeypatch.delenv("LOCKRACE_READS", raising=False)
    before = backend.reads
    try:
        backend.reads = "loop"
        fast, fast_calls = await _four_races(backend, make_race)
        backend.reads = "threaded"
        threaded, threaded_calls = await _four_races(backend, make_race)
    finally:
        backend.reads = before
    assert fast == [("nowait", "refused"), ("timeout", "timed_out", True),
                    ("released", True, "ok", ("A",)), ("deadlock", ["deadlock", "ok"])], fast
    assert threaded == fast
    # threaded: every statement on the session's thread (sent and read there); the
    # fast path reads these short answers on the loop
    thread_call = "execute_blocking" if backend.family == "mysql" else "_execute"
    statements = 16  # A: 7, B: 9
    assert threaded_calls.count(thread_call) == statements, threaded_calls
    assert fast_calls.count(thread_call) < statements, fast_calls


async def test_reads_from_the_environment(monkeypatch, pg_backend):
    monkeypatch.setenv("LOCKRACE_READS", "threaded")
    assert reads_from_env() == "threaded"
    assert pg_backend.threaded_reads()
    session = await pg_backend.connect_session("T")
    try:
        assert session.threaded
        assert session.send("SELECT 1") is None  # nothing sent from the loop
        assert (await session.execute("SELECT 1")).outcome == "ok"
    finally:
        await session.close()
    monkeypatch.setenv("LOCKRACE_READS", "sideways")
    with pytest.raises(ValueError, match="LOCKRACE_READS"):
        reads_from_env()
    monkeypatch.delenv("LOCKRACE_READS")
    assert reads_from_env() == "loop"
    await asyncio.sleep(0)
