"""Small things a user trips on: focus vs blocked borders, the step hint while
a step still waits, statements echoed as typed."""

from __future__ import annotations

from lockrace.scenario.text_format import parse_scenario

from support.app import badge, enter, finished, running_app, until

LONG_WAIT = """\
title: a step the runner waits for while it is blocked
engines: postgres
setup:
    CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL);
    INSERT INTO accounts VALUES (1, 100);

A> BEGIN;
A> UPDATE accounts SET balance = 1 WHERE id = 1;
B> SET lock_timeout = '3s';
B> UPDATE accounts SET balance = 2 WHERE id = 1;
    expect: timed_out
    blocked-by: A
A> COMMIT;
"""


def border(panel):
    edge = panel.styles.border.top
    return edge[0], edge[1].hex


async def test_focus_and_blocked_borders_differ_in_style_and_colour(pg_server):
    async with running_app(targets={"postgres": pg_server}) as (app, pilot):
        await enter(pilot, app, "A", "BEGIN;")
        await enter(pilot, app, "A", "UPDATE accounts SET balance = 1 WHERE id = 1;")
        await finished(pilot, app, "A", 2)
        await enter(pilot, app, "B", "UPDATE accounts SET balance = 2 WHERE id = 1;")
        await until(pilot, lambda: badge(app, "B").startswith("BLOCKED"), what="B blocked")
        app.panels["A"].input.focus()
        await pilot.pause()
        focused, blocked, plain = border(app.panels["A"]), border(app.panels["B"]), border(app.panels["C"])
        assert focused[0] != blocked[0] and focused[1] != blocked[1]  # style and colour both differ
        assert len({focused[0], blocked[0], plain[0]}) == 3
        app.panels["B"].input.focus()  # focused and blocked: the focus style in the blocked colour
        await pilot.pause()
        both = border(app.panels["B"])
        assert both[0] == focused[0] and both[1] == blocked[1]
        await enter(pilot, app, "A", "COMMIT;")
        await finished(pilot, app, "B", 1)
        app.panels["B"].input.focus()  # no longer blocked: just the focus border
        await pilot.pause()
        assert border(app.panels["B"]) == focused


async def test_statements_are_echoed_with_their_semicolon(pg_server):
    async with running_app(targets={"postgres": pg_server}) as (app, pilot):
        app.panels["A"].input.focus()
        for key in "SELECT 1;":
            await pilot.press("space" if key == " " else "semicolon" if key == ";" else key)
        await pilot.press("enter")
        await finished(pilot, app, "A", 1)
        assert "A> SELECT 1;" in app.panels["A"].lines


async def test_hint_says_the_step_is_waiting_not_next(pg_server):
    scenario = parse_scenario(LONG_WAIT, name="long-wait")
    async with running_app(targets={"postgres": pg_server}, scenario=scenario) as (app, pilot):
        player = app.player
        for n in range(3):
            await pilot.press("f5")
            await until(pilot, lambda: player.position == n + 1 and not player.busy, what=f"step {n + 1}")
        assert "next, F5: step 4/5" in app.panels["B"].session_log.next_text
        await pilot.press("f5")
        await until(pilot, lambda: badge(app, "B").startswith("BLOCKED"), what="step 4 blocked")
        await until(pilot, lambda: "waiting" in (app.panels["B"].session_log.next_text or ""), what="waiting hint")
        hint = app.panels["B"].session_log.next_text
        assert "next, F5" not in hint
        assert hint.startswith("⏳ step 4/5 waiting: B is blocked by A on accounts id=1")
        assert all(p.session_log.next_text is None for s, p in app.panels.items() if s != "B")
        assert "step 4/5 in progress" in str(app.query_one("#scenario-bar").render())
        await until(pilot, lambda: not player.busy, timeout=10, what="step 4 timed out")
        await pilot.pause()
        assert "next, F5: step 5/5" in app.panels["A"].session_log.next_text
        assert app.panels["B"].session_log.next_text is None
