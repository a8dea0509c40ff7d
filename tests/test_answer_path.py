"""The way from a submitted statement to its answer (what a caller of Race.run waits):
sent at once, read on the session's own thread, the answer back before the
refusal's holder is asked (real PostgreSQL; the thread on its own, no server)."""

from __future__ import annotations

import asyncio
import threading
import time

import psycopg
import pytest

from lockrace.backends.worker import SessionThread
from lockrace.core.events import StatementExplained, StatementFinished


async def test_statement_is_on_the_wire_when_submit_returns(pg_server, pg_backend, make_race):
    race = await make_race(pg_backend, ("A",))
    stmt = race.submit("A", "SELECT pg_sleep(0.3) AS lockrace_probe")
    # no await since submit: the loop has not run anything of the race yet, and the
    # server already runs the statement (a blocking connection of our own asks it)
    with psycopg.connect(pg_server.conninfo, autocommit=True) as other:
        row = other.execute("SELECT state, query FROM pg_stat_activity WHERE pid = %s",
                            [race.sessions["A"].ident]).fetchone()
    assert row is not None and row[0] == "active" and "lockrace_probe" in row[1], row
    await stmt.done.wait()
    assert stmt.result.outcome == "ok"
    assert 300 <= stmt.result.elapsed_ns / 1e6 < 2000  # timed from the send, on the session's thread


async def test_refusal_answer_comes_before_its_holder_is_named(pg_backend, make_race):
    race = await make_race(pg_backend, ("A", "B"))
    await pg_backend.run_admin(["CREATE TABLE answer_rows (id int PRIMARY KEY)", "INSERT INTO answer_rows VALUES (1)"])
    order: list[tuple[str, object]] = []
    race.subscribe(lambda e: order.append((type(e).__name__, getattr(e.result, "held_by", "-")))
                   if isinstance(e, (StatementFinished, StatementExplained)) and e.session == "B" else None)
    await race.run("A", "BEGIN")
    await race.run("A", "SELECT id FROM answer_rows WHERE id = 1 FOR UPDATE")
    res = await race.run("B", "SELECT id FROM answer_rows WHERE id = 1 FOR UPDATE NOWAIT")
    assert res.outcome == "refused"
    assert race.sessions["B"].busy  # still asking who holds the row: the next statement waits for it
    # Race.run waits for that question before B's next statement: never "busy"
    again = await race.run("B", "SELECT 1")
    assert again.outcome == "ok"
    assert res.held_by == ("A",)
    assert order[:2] == [("StatementFinished", None), ("StatementExplained", ("A",))]
    await race.run("A", "ROLLBACK")


async def test_session_thread_answers_and_errors():
    worker = SessionThread("lockrace-test")
    try:
        assert await worker.submit(lambda a, b: a + b, 2, 3) == 5
        with pytest.raises(ZeroDivisionError):
            await worker.submit(lambda: 1 / 0)
        names = await worker.submit(lambda: threading.current_thread().name)
        assert names == "lockrace-test"
    finally:
        worker.stop()


async def test_session_thread_finishes_a_call_its_caller_gave_up():
    worker = SessionThread("lockrace-test")
    finished = threading.Event()

    def slow():
        time.sleep(0.2)
        finished.set()
        return "late"

    try:
        future = worker.submit(slow)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(future, 0.05)
        assert future.cancelled()
        # the call is never abandoned half-way: it ends, and the next one runs after it
        assert await worker.submit(lambda: finished.is_set()) is True
    finally:
        worker.stop()
