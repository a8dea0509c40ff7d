"""Pilot tests: PostgreSQL isolation specs in the app, on the embedded PostgreSQL 18.

A spec loads like any scenario: its setup runs (global, then each session's),
the user picks one of its permutations, and F5/F6 step that permutation.
Specs with more than four sessions let the user choose which four panels show.
"""

from __future__ import annotations

import re


from lockrace.app.scenario_picker import ScenarioPicker
from lockrace.app.spec_screens import PermutationPicker, SessionChooser
from lockrace.app.timeline import render_timeline
from lockrace.scenario.spec_format import read_spec

from support.app import badge, running_app, until
from support.flavor import private_server_name
from support.paths import DATA, ISOLATION

UPSTREAM = ISOLATION / "upstream" / "specs"
NOWAIT = UPSTREAM / "nowait.spec"
SIX = DATA / "six-sessions.spec"
MARIADB_DEADLOCK = ISOLATION / "mariadb" / "specs" / "mariadb-deadlock.spec"


def text(app, session: str) -> str:
    return "\n".join(app.logs[session].lines)


async def test_nowait_spec_opened_by_path_in_the_second_permutation(pg_server):
    async with running_app(targets={"postgres": pg_server}) as (app, pilot):
        await pilot.press("f9")
        assert isinstance(app.screen, ScenarioPicker)
        app.screen.focus_path()
        app.screen.query_one("#picker-path").value = str(NOWAIT)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, PermutationPicker), what="permutation list")
        listed = [str(app.screen.query_one("#permutation-list").get_option_at_index(i).prompt)
                  for i in range(6)]
        assert listed[0].startswith("1  s1a s1b s2a s2b")
        assert listed[1].startswith("2  s1a s2a s1b s2b")
        await pilot.press("down", "enter")  # the second: s2a comes while s1 holds the row
        await until(pilot, lambda: app.ready.is_set() and app.player is not None
                    and app.player.scenario.name == "nowait", timeout=20, what="spec loaded")
        player = app.player
        assert player.permutation == 1 and player.order == ["s1a", "s2a", "s1b", "s2b"]
        assert list(app.panels) == ["s1", "s2"]  # the spec's sessions are the panels; no empty C, D
        assert re.fullmatch(r"Session s1 · pid \d+", str(app.panels["s1"].border_title))
        # each session's setup ran in its own session: both are in a transaction
        assert "s1> BEGIN;" in text(app, "s1") and "s2> BEGIN;" in text(app, "s2")
        assert app.panels["s2"].status.transaction().label == "in transaction"
        bar = str(app.query_one("#scenario-bar").render())
        assert "permutation 2/6: s1a s2a s1b s2b" in bar
        assert app.panels["s1"].has_class("has-next")  # s1a is next
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Choose permutation…" in titles and "Show sessions…" in titles and "Open scenario file…" in titles

        await pilot.press("f5")
        await until(pilot, lambda: player.position == 1 and not player.busy, what="first step")
        assert app.panels["s2"].has_class("has-next")
        await pilot.press("f6")
        await until(pilot, lambda: player.finished, timeout=30, what="the permutation's end")
        assert [r.step.name for r in player.records] == ["s1a", "s2a", "s1b", "s2b"]
        assert [r.result.outcome for r in player.records] == ["ok", "refused", "ok", "ok"]
        assert "  1 | x" in app.logs["s1"].lines and "(1 row)" in text(app, "s1")
        assert 'ERROR: 55P03: could not obtain lock on row in relation "foo"' in text(app, "s2")
        assert app.panels["s2"].status.last.outcome == "ok"  # the last statement was s2b's COMMIT
        assert app.panels["s2"].status.transaction().label == "idle"
        assert "finished" in str(app.query_one("#scenario-bar").render())

        await pilot.press("ctrl+t")  # pick the first permutation instead: the spec restarts from setup
        assert isinstance(app.screen, PermutationPicker)
        await pilot.press("up", "enter")
        await until(pilot, lambda: app.ready.is_set() and app.player is not player, timeout=20, what="reload")
        assert app.player.permutation == 0 and app.player.position == 0
        assert "refused" not in text(app, "s2")


async def test_six_sessions_switching_the_shown_four(pg_server):
    spec = read_spec(SIX)
    async with running_app(targets={"postgres": pg_server}, scenario=spec) as (app, pilot):
        player = app.player
        assert player.order == ["s1u", "s2u", "s4n", "s5w", "s6s", "s1c", "s3r"]
        assert list(app.panels) == ["s1", "s2", "s3", "s4"]
        bar = str(app.query_one("#scenario-bar").render())
        assert "[s1] [s2] [s3] [s4]  s5   s6" in bar  # every session listed, the shown ones marked
        assert app.timeline_model.lanes == ["s1", "s2", "s3", "s4", "s5", "s6"]

        for _ in range(4):  # s1u s2u s4n s5w: s5 (not shown) ends up waiting for s1
            await pilot.press("f5")
            await until(pilot, lambda: not player.busy, what="a step")
        assert player.position == 4
        await until(pilot, lambda: app.logs["s5"].status.running is not None
                    and app.logs["s5"].status.running.blocked_since is not None, what="s5 blocked")
        assert "(session s6 is not shown)" in str(app.query_one("#scenario-bar").render())
        assert "s5 " in render_timeline(app.timeline_model, 150, app.timeline_model.bars[-1].start_ns + 10**8).plain

        # show s1, s4, s5, s6: untick s2 and s3, tick s5 and s6
        await pilot.press("ctrl+g")
        assert isinstance(app.screen, SessionChooser)
        await pilot.press("down", "space", "down", "space", "down", "down", "space", "down", "space")
        await pilot.press("enter")
        await until(pilot, lambda: not isinstance(app.screen, SessionChooser), what="chooser closed")
        assert list(app.panels) == ["s1", "s4", "s5", "s6"]
        assert app.panels["s5"].has_class("blocked")
        assert badge(app, "s5").startswith("BLOCKED by s1")
        assert "s5> UPDATE t SET v = v + 100 WHERE id = 1;" in app.panels["s5"].lines  # kept while hidden
        assert app.panels["s6"].has_class("has-next")  # s6s is next and now shown
        assert app.panels["s4"].status.last.outcome == "refused"

        await pilot.press("f6")
        await until(pilot, lambda: player.finished, timeout=30, what="the permutation's end")
        assert app.panels["s6"].status.last.outcome == "skipped"
        s5 = app.panels["s5"].status.last
        assert s5.outcome == "ok" and s5.blocked_by == ("s1",)
        assert "UPDATE 1" in text(app, "s2")  # s2 ran while hidden
        assert "  1 | 101" in app.logs["s3"].lines  # s5's wait ended in its update, read by hidden s3
        assert app.timeline_model.lanes == ["s1", "s2", "s3", "s4", "s5", "s6"]


async def test_mariadb_spec_steps_through_a_deadlock(mysql_server):
    """A spec written for the MySQL family (``# engines: mysql``) steps the same way on MariaDB."""
    spec = read_spec(MARIADB_DEADLOCK)
    async with running_app(engine="mysql", targets={"mysql": mysql_server}, scenario=spec) as (app, pilot):
        player = app.player
        assert private_server_name() in app.sub_title and list(app.panels) == ["s1", "s2"]
        for _ in range(3):  # s1a s2a s1b: s1b waits for s2's row
            await pilot.press("f5")
            await until(pilot, lambda: not player.busy, what="a step")
        assert badge(app, "s1").startswith("BLOCKED by s2")
        await pilot.press("f6")
        await until(pilot, lambda: player.finished, timeout=30, what="the permutation's end")
        outcomes = {r.step.name: r.result.outcome for r in player.records}
        assert outcomes["s2b"] == "deadlock" and outcomes["s1b"] == "ok"
        assert "ERROR 1213 (40001)" in text(app, "s2")
        assert player.records[2].result.blocked_by == ("s2",)


async def test_star_marked_step_runs_to_the_servers_outcome(pg_server):
    """``locktbl(*)``: the spec says the step waits, so the app launches it and moves on;
    the 10 ms statement_timeout then cancels it and the permutation ends.  (This checks the
    marker is shown and the permutation completes with the server's outcome; with a 10 ms
    timeout it cannot tell "not waited for" from "waited 10 ms".)"""
    spec = read_spec(UPSTREAM / "timeouts.spec")
    async with running_app(targets={"postgres": pg_server}, scenario=spec) as (app, pilot):
        player = app.player
        assert player.order == ["rdtbl", "sto", "locktbl"]
        assert "locktbl(*)" in str(app.query_one("#scenario-bar").render())
        await pilot.press("f6")
        await until(pilot, lambda: player.finished, timeout=30, what="the permutation's end")
        last = player.records[-1]
        assert last.step.name == "locktbl" and last.problem == ""
        assert last.result.outcome == "statement_timeout"  # permutation 1 sets statement_timeout = '10ms'
        assert "canceling statement due to statement timeout" in text(app, "s2")
