"""A listener (the app's panels, a transcript) that raises never stops the race: the
statement is still sent and answered, the session is freed, and the failure is
reported (a note to the other listeners, a log line).  Real PostgreSQL."""

from __future__ import annotations

import logging

from lockrace.core.events import ServerNote, StatementExplained, StatementFinished


async def test_a_listener_that_raises_on_every_event_leaves_the_race_running(pg_backend, make_race, caplog):
    race = await make_race(pg_backend, ("A", "B"))
    await pg_backend.run_admin(["CREATE TABLE listened_rows (id int PRIMARY KEY)",
                                "INSERT INTO listened_rows VALUES (1)"])

    def broken(event):
        raise RuntimeError("this listener is broken")

    seen: list = []
    race.subscribe(broken)
    race.subscribe(seen.append)
    with caplog.at_level(logging.ERROR, logger="lockrace.engine"):
        assert (await race.run("A", "BEGIN")).outcome == "ok"
        assert (await race.run("A", "SELECT id FROM listened_rows WHERE id = 1 FOR UPDATE")).outcome == "ok"
        res = await race.run("B", "SELECT id FROM listened_rows WHERE id = 1 FOR UPDATE NOWAIT")
        assert res.outcome == "refused", res.message
        await race.settled("B")
    assert res.held_by == ("A",)
    assert race.sessions["B"].running is None and race.sessions["B"].txn == "idle"
    # the race goes on: the session takes its next statement, the holder lets go
    assert (await race.run("B", "SELECT 1")).outcome == "ok"
    assert (await race.run("A", "ROLLBACK")).outcome == "ok"
    await race.settled("A")
    assert race.sessions["A"].running is None and race.sessions["A"].txn == "idle"
    # the other listener heard everything, and of the failure
    assert any(isinstance(e, StatementFinished) and e.result is res for e in seen)
    assert any(isinstance(e, StatementExplained) and e.session == "B" for e in seen)
    notes = [e.text for e in seen if isinstance(e, ServerNote) and e.level == "error"]
    assert notes and all("a listener failed" in n and "this listener is broken" in n for n in notes)
    assert race.listener_failures and all("RuntimeError" in f for f in race.listener_failures)
    assert any("this listener is broken" in r.getMessage() for r in caplog.records)


async def test_a_lone_listener_that_raises_is_logged_and_the_refusal_still_runs(pg_backend, make_race, caplog):
    race = await make_race(pg_backend, ("A", "B"))
    await pg_backend.run_admin(["CREATE TABLE lone_rows (id int PRIMARY KEY)", "INSERT INTO lone_rows VALUES (1)"])
    race.subscribe(lambda event: 1 / 0)
    with caplog.at_level(logging.ERROR, logger="lockrace.engine"):
        await race.run("A", "BEGIN")
        await race.run("A", "SELECT id FROM lone_rows WHERE id = 1 FOR UPDATE")
        res = await race.run("B", "SELECT id FROM lone_rows WHERE id = 1 FOR UPDATE NOWAIT")
        await race.settled("B")
        await race.run("A", "ROLLBACK")
        await race.settled("A")
    assert res.outcome == "refused" and res.held_by == ("A",)
    assert all(s.running is None for s in race.sessions.values())
    assert any("ZeroDivisionError" in r.getMessage() for r in caplog.records)
