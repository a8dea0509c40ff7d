"""A NOWAIT refusal says who held the lock, as the server's lock views tell right
after it (real servers: PostgreSQL row and table locks, MariaDB row locks)."""

from __future__ import annotations

import pytest

from lockrace.app.session_log import SessionLog
from lockrace.app.status import SessionStatus
from lockrace.core.events import StatementExplained, StatementFinished, StatementResult
from lockrace.render.transcript import holder_words

SETUP = {
    "postgres": "CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL); INSERT INTO accounts VALUES (1, 1), (2, 2);",
    "mysql": "CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL) ENGINE=InnoDB",
}


async def test_row_refusal_names_the_holder(engine, backend, make_race):
    race = await make_race(backend, ("A", "B", "C"))
    await backend.run_admin([SETUP[engine]])
    if engine == "mysql":
        await backend.run_admin(["INSERT INTO accounts VALUES (1, 1), (2, 2)"])
    for sql in ("BEGIN;", "SELECT id FROM accounts WHERE id = 1 FOR UPDATE;"):
        assert (await race.run("A", sql)).outcome == "ok"
    explained = []
    race.subscribe(lambda e: explained.append(e) if isinstance(e, StatementExplained) else None)
    log = SessionLog("B", backend.flavor)  # B's transcript as the app keeps it
    race.subscribe(lambda e: log.apply(e) if e.session == "B" else None)
    res = await race.run("B", "SELECT id FROM accounts WHERE id = 1 FOR UPDATE NOWAIT;")
    assert res.outcome == "refused"
    await race.settled("B")  # the holder is asked after the answer, in the same result
    assert res.held_by == ("A",)
    assert [e.result for e in explained] == [res]
    # the transcript's line for the refusal names the holder (written once the server told)
    assert sum("lock held by A" in line for line in log.lines) == 1, log.lines
    assert holder_words(res) == "lock held by A"
    await race.run("A", "COMMIT;")


async def test_table_refusal_names_every_holder(pg_backend, make_race):
    race = await make_race(pg_backend, ("A", "B", "C"))
    await pg_backend.run_admin([SETUP["postgres"]])
    for name in ("A", "B"):
        assert (await race.run(name, "BEGIN;")).outcome == "ok"
        assert (await race.run(name, f"SELECT * FROM accounts WHERE id = {1 if name == 'A' else 2};")).outcome == "ok"
    assert (await race.run("C", "BEGIN;")).outcome == "ok"
    res = await race.run("C", "LOCK TABLE accounts IN ACCESS EXCLUSIVE MODE NOWAIT;")
    assert res.outcome == "refused", res.message
    await race.settled("C")
    assert res.held_by == ("A", "B")
    await race.run("C", "ROLLBACK;")
    await race.run("A", "COMMIT;")
    await race.run("B", "COMMIT;")


@pytest.mark.parametrize("held_by, badge, words", [
    (("A",), "refused: A holds the lock", "lock held by A"),
    (("A", "B"), "refused: A and B hold the lock", "lock held by A and B"),
    ((), "refused: holder gone", "the lock views showed no holder any more"),
    # no real server refuses to answer on cue: a result as the engine leaves it when the views failed
    (None, "refused: holder unknown", "the server's lock views cannot tell who holds the lock"),
    # a client outside the race: short on the badge (80 columns cut it at ~36), whole in the transcript
    (("another client (pid 23509)",), "refused: client pid 23509 holds the lock",
     "lock held by another client (pid 23509)"),
])
def test_refusal_words(held_by, badge, words):
    res = StatementResult("refused", code="55P03", held_by=held_by)
    status = SessionStatus("B")
    status.apply(StatementFinished("B", 1, 1, "SELECT 1 FOR UPDATE NOWAIT;", res))
    assert status.activity().label == badge
    assert holder_words(res) == words


async def test_a_foreign_holder_is_named_as_another_client(pg_server, pg_backend, make_race):
    """A client that is not one of the race's sessions holds the row: the wait and
    the refusal name it the same way the skipped rows do, "another client (pid N)"."""
    import psycopg

    race = await make_race(pg_backend, ("A", "B"))
    await pg_backend.run_admin([SETUP["postgres"]])
    with psycopg.connect(pg_server.conninfo, options=f"-c search_path={pg_backend.sandbox}") as foreign:
        foreign.execute("SELECT id FROM accounts WHERE id = 1 FOR UPDATE")  # its transaction stays open
        named = f"another client (pid {foreign.info.backend_pid})"
        res = await race.run("A", "SELECT id FROM accounts WHERE id = 1 FOR UPDATE NOWAIT")
        await race.settled("A")
        assert (res.outcome, res.held_by) == ("refused", (named,))
        waiting = race.submit("B", "SELECT id FROM accounts WHERE id = 1 FOR UPDATE")
        assert await race.wait_blocked_or_done(waiting, 5) and waiting.result is None
        foreign.rollback()
        await race.settled("B")
        assert waiting.result.outcome == "ok"
        assert waiting.result.blocked_by == (named,) and waiting.result.blockers_seen == (named,)
