"""Pilot tests of the app on real servers: what a user types, what the panels show."""

from __future__ import annotations

import pytest

from lockrace.app.timeline import render_timeline
from lockrace.engine.race import Race
from lockrace.engine.runner import ScenarioRunner
from lockrace.scenario.library import resolve
from lockrace.scenario.text_format import read_scenario

from support.app import badge, enter, finished, running_app, until
from support.flavor import private_server_name


@pytest.fixture
def targets(request, engine):
    name = "pg_server" if engine == "postgres" else "mysql_server"
    return {engine: request.getfixturevalue(name)}


def panel_text(app, session: str) -> str:
    return "\n".join(app.panels[session].lines)


async def test_free_form_b_blocked_by_a_until_a_commits(engine, targets):
    async with running_app(engine=engine, targets=targets) as (app, pilot):
        assert ("PostgreSQL 18" if engine == "postgres" else private_server_name()) in app.sub_title
        # A types BEGIN key by key, like a person
        await pilot.press("alt+a")
        for key in "BEGIN;":
            await pilot.press(key)
        await pilot.press("enter")
        await finished(pilot, app, "A", 1)
        await enter(pilot, app, "A", "UPDATE accounts SET balance = 1 WHERE id = 1;")
        await finished(pilot, app, "A", 2)
        assert app.panels["A"].status.transaction().label == "in transaction"

        await pilot.press("tab")  # Tab moves to B's panel
        assert app.focused is app.panels["B"].input
        app.panels["B"].input.value = "UPDATE accounts SET balance = 2 WHERE id = 1;"
        await pilot.press("enter")
        await until(pilot, lambda: badge(app, "B").startswith("BLOCKED by A"), what="B blocked by A")
        assert "accounts" in badge(app, "B")
        await until(pilot, lambda: "waiting" in app.panels["B"].status.wait_line(), what="wait counter")
        assert app.panels["B"].has_class("blocked")
        bar = app.timeline_model.bars[-1]
        assert bar.session == "B" and bar.state() == "blocked" and bar.blockers == ("A",)
        assert "waits on A" in render_timeline(app.timeline_model, 150, bar.start_ns + 10**9).plain

        await enter(pilot, app, "A", "COMMIT;")
        await finished(pilot, app, "B", 1)
        res = app.panels["B"].status.last
        assert res.outcome == "ok" and res.blocked_by == ("A",)
        assert ("UPDATE 1" if engine == "postgres" else "Query OK, 1 row affected") in panel_text(app, "B")
        assert "blocked by A" in panel_text(app, "B")
        assert badge(app, "B") == ""  # nothing to report any more: the badge says idle
        assert app.panels["B"].status.transaction().label == "idle"
        assert bar.outcome == "ok" and bar.was_blocked


async def test_nowait_shows_refused(pg_server):
    async with running_app(targets={"postgres": pg_server}) as (app, pilot):
        await enter(pilot, app, "A", "BEGIN;")
        await enter(pilot, app, "A", "SELECT id FROM accounts WHERE id = 1 FOR UPDATE;")
        await finished(pilot, app, "A", 2)
        await enter(pilot, app, "B", "SELECT id FROM accounts WHERE id = 1 FOR UPDATE NOWAIT;")
        await finished(pilot, app, "B", 1)
        assert badge(app, "B") == "refused: A holds the lock"  # as pgrowlocks told right after the refusal
        assert 'ERROR: 55P03: could not obtain lock on row in relation "accounts"' in panel_text(app, "B")


async def test_lock_timeout_shows_timed_out_with_budget(pg_server):
    async with running_app(targets={"postgres": pg_server}) as (app, pilot):
        await enter(pilot, app, "A", "BEGIN;")
        await enter(pilot, app, "A", "UPDATE accounts SET balance = 1 WHERE id = 2;")
        await finished(pilot, app, "A", 2)
        await enter(pilot, app, "B", "SET lock_timeout = '2s';")
        await finished(pilot, app, "B", 1)
        await enter(pilot, app, "B", "UPDATE accounts SET balance = 2 WHERE id = 2;")
        await until(pilot, lambda: "of 2 s lock_timeout budget" in app.panels["B"].status.wait_line(),
                    what="budget counter")
        await finished(pilot, app, "B", 2)
        assert badge(app, "B") == "timed out (2 s lock_timeout)"
        assert "ERROR: 55P03: canceling statement due to lock timeout" in panel_text(app, "B")
        bar = app.timeline_model.bars[-1]
        assert bar.budget.ms == 2000 and bar.outcome == "timed_out"
        drawn = render_timeline(app.timeline_model, 150, bar.end_ns).plain
        assert "┃" in drawn and "timed out" in drawn


async def test_skip_locked_shows_skipped(pg_server):
    async with running_app(targets={"postgres": pg_server}) as (app, pilot):
        claim = "SELECT * FROM jobs ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED;"
        await enter(pilot, app, "A", "BEGIN;")
        await enter(pilot, app, "A", claim)
        await finished(pilot, app, "A", 2)
        await enter(pilot, app, "D", claim)
        await finished(pilot, app, "D", 1)
        assert badge(app, "D") == "skipped 1 row locked by A"
        assert "resize image" in panel_text(app, "D")


async def test_cancel_a_blocked_statement(engine, targets):
    async with running_app(engine=engine, targets=targets) as (app, pilot):
        await enter(pilot, app, "A", "BEGIN;")
        await enter(pilot, app, "A", "UPDATE accounts SET balance = 1 WHERE id = 3;")
        await finished(pilot, app, "A", 2)
        await enter(pilot, app, "C", "UPDATE accounts SET balance = 3 WHERE id = 3;")
        await until(pilot, lambda: badge(app, "C").startswith("BLOCKED by A"), what="C blocked")
        await pilot.press("f2")  # C's panel has focus
        await finished(pilot, app, "C", 1)
        assert badge(app, "C") == "cancelled"
        assert app.panels["C"].status.last.outcome == "cancelled"
        await pilot.press("alt+a", "f3")  # roll A back
        await until(pilot, lambda: app.panels["A"].status.txn == "idle", what="A rolled back")


@pytest.mark.parametrize("name,engine", [("pg-skip-locked", "postgres"), ("mysql-lock-wait-timeout", "mysql")])
async def test_builtin_scenario_to_the_end(name, engine, targets):
    scenario = resolve(name)
    async with running_app(engine=engine, scenario=scenario, targets=targets) as (app, pilot):
        player = app.player
        first = scenario.steps[0]
        assert app.panels[first.session].has_class("has-next")
        await pilot.press("f5")  # one step
        await until(pilot, lambda: player.position == 1 and not player.busy, what="first step")
        await pilot.press("f6")  # the rest
        await until(pilot, lambda: player.finished, timeout=30, what="scenario end")
        assert len(player.records) == len(scenario.steps)
        assert [f for r in player.records for f in r.failures] == []
        assert player.met() == (len(scenario.steps), 0)
        shown = "\n".join(panel_text(app, s) for s in app.panels)
        assert "✗" not in shown and "as expected" in shown
        assert not any(p.has_class("has-next") for p in app.panels.values())
        # after the scenario the user keeps typing in the same sessions
        await enter(pilot, app, "B", "SELECT 42 AS answer;")
        await until(pilot, lambda: "42" in panel_text(app, "B"), what="free typing after the scenario")


async def test_saved_race_replays_and_verifies(pg_server, pg_backend, tmp_path):
    async with running_app(targets={"postgres": pg_server}, save_dir=tmp_path) as (app, pilot):
        await enter(pilot, app, "A", "BEGIN;")
        await enter(pilot, app, "A", "UPDATE accounts SET balance = balance - 10 WHERE id = 1;")
        await finished(pilot, app, "A", 2)
        await enter(pilot, app, "B", "UPDATE accounts SET balance = balance + 10 WHERE id = 1;")
        await until(pilot, lambda: badge(app, "B").startswith("BLOCKED"), what="B blocked")
        await enter(pilot, app, "A", "COMMIT;")
        await finished(pilot, app, "B", 1)
        await enter(pilot, app, "B", "SELECT balance FROM accounts WHERE id = 1;")
        await finished(pilot, app, "B", 2)
        race_path, text_path = app.save_files("saved")
    transcript = text_path.read_text()
    assert "B> UPDATE accounts SET balance = balance + 10 WHERE id = 1;" in transcript
    scenario = read_scenario(race_path)
    assert [s.session for s in scenario.steps] == ["A", "A", "B", "A", "B"]
    blocked = scenario.steps[2]
    assert {e.key for e in blocked.expectations} >= {"blocked_by", "completes_after"}
    race = await Race(pg_backend, scenario.session_names()).open()
    try:
        report = await ScenarioRunner(race, scenario, step_timeout=10).run()
    finally:
        await race.close()
    assert report.failures == []


async def test_switch_engine_keeps_both_servers(pg_server, mysql_server):
    targets = {"postgres": pg_server, "mysql": mysql_server}
    async with running_app(targets=targets) as (app, pilot):
        assert "PostgreSQL" in app.sub_title
        await pilot.press("f8")
        await until(pilot, lambda: app.engine == "mysql" and app.ready.is_set(), timeout=20, what="mysql race")
        assert private_server_name() in app.sub_title
        await enter(pilot, app, "A", "SELECT balance FROM accounts WHERE id = 1;")
        await finished(pilot, app, "A", 1)
        assert "100" in panel_text(app, "A")
        await pilot.press("f8")
        await until(pilot, lambda: app.engine == "postgres" and app.ready.is_set(), timeout=20, what="pg again")
        assert set(app.pool.backends) == {"postgres", "mysql"}


async def test_help_and_palette(pg_server):
    async with running_app(targets={"postgres": pg_server}) as (app, pilot):
        await pilot.press("f1")
        from lockrace.app.help_screen import HelpScreen

        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Cancel statement" in titles and "Scenario: pg-skip-locked" in titles
        await pilot.press("f9")
        from lockrace.app.scenario_picker import ScenarioPicker

        assert isinstance(app.screen, ScenarioPicker)
        await pilot.press("escape")


async def test_multi_line_editor_runs_in_the_focused_session(pg_server):
    async with running_app(targets={"postgres": pg_server}) as (app, pilot):
        await pilot.press("tab")  # session B
        await pilot.press("ctrl+n")
        from lockrace.app.sql_editor import SqlEditor

        assert isinstance(app.screen, SqlEditor)
        app.screen.query_one("#editor-area").text = "SELECT id,\n       balance\n  FROM accounts WHERE id = 2;"
        await pilot.press("ctrl+r")
        await finished(pilot, app, "B", 1)
        assert "B> SELECT id," in panel_text(app, "B") and "(1 row)" in panel_text(app, "B")


async def test_race_lab_opens_and_leaves_cleanly(pg_server):
    async with running_app(targets={"postgres": pg_server}) as (app, pilot):
        from lockrace.app.lab_screen import LabScreen

        await pilot.press("ctrl+l")
        assert isinstance(app.screen, LabScreen)
        await pilot.pause(1.0)  # the lab is mid-run
        await pilot.press("escape")
        await pilot.pause(0.5)
        assert not isinstance(app.screen, LabScreen)
        assert app.return_code is None  # still running
        await enter(pilot, app, "A", "SELECT 1 AS still_here;")
        await finished(pilot, app, "A", 1)
        assert "still_here" in panel_text(app, "A")


async def test_failed_transaction_needs_rollback(pg_server):
    async with running_app(targets={"postgres": pg_server}) as (app, pilot):
        await enter(pilot, app, "A", "BEGIN;")
        await enter(pilot, app, "A", "SELECT 1 / 0;")
        await finished(pilot, app, "A", 2)
        await until(pilot, lambda: app.panels["A"].status.transaction().label
                    == "failed transaction (ROLLBACK needed)", what="failed transaction badge")
        assert badge(app, "A") == "error"
        assert "ERROR: 22012: division by zero" in panel_text(app, "A")
        await pilot.press("f3")  # roll back the focused session
        await until(pilot, lambda: app.panels["A"].status.txn == "idle", what="rolled back")
        assert app.panels["A"].lines[-2] == "ROLLBACK"


async def test_reset_gives_fresh_sessions_and_tables(pg_server):
    async with running_app(targets={"postgres": pg_server}) as (app, pilot):
        await enter(pilot, app, "A", "BEGIN;")
        await enter(pilot, app, "A", "UPDATE accounts SET balance = 0 WHERE id = 1;")
        await finished(pilot, app, "A", 2)
        await enter(pilot, app, "A", "COMMIT;")
        await finished(pilot, app, "A", 3)
        await pilot.press("f4")
        await until(pilot, lambda: app.ready.is_set() and app.panels["A"].status.statements == 0, what="reset")
        assert app.timeline_model.bars == []
        await enter(pilot, app, "A", "SELECT balance FROM accounts WHERE id = 1;")
        await finished(pilot, app, "A", 1)
        assert " 100" in panel_text(app, "A")
