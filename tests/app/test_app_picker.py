"""F9 opens on this engine's scenarios and filters as you type; Ctrl+F (or the
palette) goes back to the free-form sandbox with fresh tables."""

from __future__ import annotations

from lockrace.app.scenario_picker import ScenarioPicker, ordered
from lockrace.scenario.library import builtins, resolve

from support.app import enter, finished, running_app, until


def names(scenarios):
    return [s.name for s in scenarios]


def test_current_engine_first_then_filtered():
    all_ = builtins()
    pg = names(ordered(all_, "postgres"))
    my = names(ordered(all_, "mysql"))
    assert pg[0].startswith("pg-") and my[0].startswith("mysql-")
    pg_all = ordered(all_, "postgres")
    first_other = next(i for i, sc in enumerate(pg_all) if not sc.runs_on("postgres"))
    assert first_other > 0 and not any(sc.runs_on("postgres") for sc in pg_all[first_other:])
    assert any(n.startswith("mysql-") for n in pg[first_other:])
    assert names(ordered(all_, "postgres", "skip"))[:2] == ["pg-skip-locked", "pg-skip-locked-worker-queue"]
    assert names(ordered(all_, "mysql", "skip"))[0] == "mysql-skip-locked"
    assert names(ordered(all_, "postgres", "pgsl"))[0] == "pg-skip-locked"  # letters in order
    assert "pg-deadlock" in names(ordered(all_, "postgres", "cycles"))  # a lesson word
    assert ordered(all_, "postgres", "no such words here") == []


async def test_picker_filters_as_you_type_and_enter_loads(pg_server):
    async with running_app(targets={"postgres": pg_server}) as (app, pilot):
        await pilot.press("f9")
        await until(pilot, lambda: isinstance(app.screen, ScenarioPicker), what="picker")
        picker = app.screen
        assert picker.highlighted.name.startswith("pg-")
        assert app.focused.id == "picker-filter"
        for key in "skip":
            await pilot.press(key)
        assert picker.highlighted.name == "pg-skip-locked"
        assert all("skip" in s.name for s in picker.shown)
        await pilot.press("down")
        assert picker.highlighted.name == "pg-skip-locked-worker-queue"
        await pilot.press("up", "enter")
        await until(pilot, lambda: app.player is not None and app.player.scenario.name == "pg-skip-locked"
                    and app.ready.is_set(), timeout=20, what="pg-skip-locked loaded")
        await pilot.press("f9")
        await until(pilot, lambda: isinstance(app.screen, ScenarioPicker), what="picker again")
        await pilot.press("escape")
        assert not isinstance(app.screen, ScenarioPicker)
        assert app.player.scenario.name == "pg-skip-locked"


async def test_ctrl_f_back_to_free_form_with_fresh_tables(pg_server):
    async with running_app(targets={"postgres": pg_server}, scenario=resolve("pg-nowait")) as (app, pilot):
        assert app.player is not None
        await enter(pilot, app, "A", "UPDATE accounts SET balance = 7;")
        await finished(pilot, app, "A", 1)
        app.ready.clear()
        await pilot.press("ctrl+f")
        await until(pilot, lambda: app.ready.is_set(), timeout=20, what="free-form race")
        assert app.player is None
        assert "Free-form race" in str(app.query_one("#scenario-bar").render())
        await enter(pilot, app, "B", "SELECT count(*) AS jobs, (SELECT sum(balance) FROM accounts) AS total FROM jobs;")
        await finished(pilot, app, "B", 1)
        assert [tuple(map(str, r)) for r in app.panels["B"].status.last.rows] == [("3", "300")]  # fresh tables
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Free-form sandbox" in titles
        from lockrace.app.help_screen import KEYS

        assert any(k == "Ctrl+F" and "free-form" in what for k, what in KEYS)
