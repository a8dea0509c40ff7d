"""The app at the terminal sizes people use (80x24, 100x30, 120x40, 160x48), with
real sessions blocked on the embedded PostgreSQL: four usable panels each with its
input line, every timeline lane, the axis and the budget marker on screen, the
timeline following the action and scrolling back, a zoomed panel, and a
2,000,000-row result that keeps 200 rows and draws them a batch at a time."""

from __future__ import annotations

import pytest

from lockrace.app.session_panel import PANEL_MAX_LINES
from lockrace.app.timeline import Bar, TimelineModel, View, render_timeline
from lockrace.core.events import Budget, StatementFinished, StatementResult, StatementStarted

from support.app import badge, enter, finished, running_app, until

SIZES = [(80, 24), (100, 30), (120, 40), (160, 48)]


def inside(region, width: int, height: int) -> bool:
    return region.x >= 0 and region.y >= 0 and region.right <= width and region.bottom <= height


async def block_three(app, pilot) -> None:
    """A holds row 1; B waits with a 5 s lock_timeout, C and D wait with none."""
    await enter(pilot, app, "A", "BEGIN;")
    await enter(pilot, app, "A", "UPDATE accounts SET balance = 1 WHERE id = 1;")
    await finished(pilot, app, "A", 2)
    await enter(pilot, app, "B", "SET lock_timeout = '5s';")
    await finished(pilot, app, "B", 1)
    for name in "BCD":
        await enter(pilot, app, name, "UPDATE accounts SET balance = 2 WHERE id = 1;")
    for name in "BCD":
        await until(pilot, lambda n=name: badge(app, n).startswith("BLOCKED by"), what=f"{name} blocked")
    await pilot.pause(0.3)


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
async def test_four_panels_lanes_axis_and_budget_marker_at_each_size(pg_server, size):
    width, height = size
    async with running_app(size=size, targets={"postgres": pg_server}) as (app, pilot):
        await block_three(app, pilot)
        timeline = app.timeline
        tl = timeline.region
        assert inside(tl, width, height - 1), f"timeline {tl} off a {size} screen"
        regions = []
        for name in "ABCD":
            panel = app.panels[name]
            assert panel.display and panel.region.height > 0
            field = panel.input.region
            assert field.height == 1 and field.width >= 30, f"{name}'s input line: {field}"
            assert inside(field, width, height - 1) and field.bottom <= tl.y, f"{name}'s input line hidden: {field}"
            assert panel.transcript.region.height >= 1, f"{name} has no room for its transcript"
            regions.append(panel.region)
        for i, a in enumerate(regions):  # the panels do not cover each other
            assert all(not a.overlaps(b) for b in regions[i + 1:])

        compact = height < 34
        assert timeline.compact is compact
        drawn = timeline.render().plain.splitlines()
        axis_lines = 1 if compact else 2
        assert len(drawn) == 4 + axis_lines
        assert timeline.content_region.height == len(drawn), "every lane and the axis are on screen"
        assert all(len(line) <= timeline.content_region.width for line in drawn), "a line would wrap"
        assert [line[:3] for line in drawn[:4]] == [" A ", " B ", " C ", " D "]
        assert "┃" in drawn[1], "B's budget marker"
        assert "█" in drawn[1] and "█" in drawn[2] and "█" in drawn[3]
        assert "┴" in drawn[4] and "0" in drawn[-1] and " s" in drawn[-1]
        if width >= 120:
            assert "waits on A" in drawn[1]


async def test_zoom_shows_the_focused_panel_alone_and_back(pg_server):
    async with running_app(size=(80, 24), targets={"postgres": pg_server}) as (app, pilot):
        await enter(pilot, app, "B", "SELECT 1 AS one;")
        await finished(pilot, app, "B", 1)
        small = app.panels["B"].transcript.region
        await pilot.press("f10")
        await pilot.pause()
        assert app.zoomed == "B"
        assert not app.panels["A"].display and not app.panels["C"].display and not app.panels["D"].display
        big = app.panels["B"].transcript.region
        assert big.width > 1.5 * small.width and big.height > 1.5 * small.height
        assert app.focused is app.panels["B"].input
        # statements in hidden panels still land in their transcripts
        await pilot.press("alt+a")  # the zoom moves to A
        await pilot.pause()
        await enter(pilot, app, "A", "SELECT 2 AS two;")
        await finished(pilot, app, "A", 1)
        assert app.zoomed == "A" and not app.panels["B"].display
        await pilot.press("f10")
        await pilot.pause()
        assert app.zoomed is None and all(app.panels[n].display for n in "ABCD")
        assert "(1 row)" in "\n".join(app.panels["B"].lines)


async def test_timeline_scrolls_back_and_follows_again(pg_server):
    async with running_app(size=(120, 40), targets={"postgres": pg_server}) as (app, pilot):
        await block_three(app, pilot)
        timeline = app.timeline
        timeline.focus()
        await pilot.pause()
        t0, t1, _ = app.timeline_model.window(timeline.clock(), timeline.view)
        await pilot.press("minus")
        assert not timeline.view.follow and timeline.view.span_ns == pytest.approx(2 * (t1 - t0), rel=0.01)
        await pilot.press("left")
        assert timeline.view.end_ns < t1
        assert "history" in timeline.border_subtitle
        await pilot.press("end")
        assert timeline.view.follow and "following" in timeline.border_subtitle


async def test_two_million_rows_in_a_panel(pg_server):
    async with running_app(size=(100, 30), targets={"postgres": pg_server}) as (app, pilot):
        await enter(pilot, app, "C", "SELECT generate_series(1, 2000000) AS n;")
        await finished(pilot, app, "C", 1, timeout=60)
        panel = app.panels["C"]
        await until(pilot, lambda: not panel.drawing, what="the rows drawn")
        text = "\n".join(panel.lines)
        assert "(first 200 of 2,000,000 rows)" in text
        assert len(panel.lines) < 220
        assert len(panel.transcript.lines) <= PANEL_MAX_LINES
        assert panel.status.last.total_rows == 2_000_000 and len(panel.status.last.rows) == 200


def _bar_events(model: TimelineModel, session: str, stmt_id: int, start_s: float, end_s: float | None,
                budget_ms: float = 0) -> None:
    start = int(start_s * 1e9)
    budget = Budget("lock_timeout", budget_ms) if budget_ms else None
    model.apply(StatementStarted(session, start, stmt_id, "UPDATE t SET v = 1", budget))
    if end_s is not None:
        result = StatementResult("ok", started_ns=start, elapsed_ns=int((end_s - start_s) * 1e9))
        model.apply(StatementFinished(session, start + result.elapsed_ns, stmt_id, "UPDATE t SET v = 1", result))


def test_a_100_ms_budget_stays_readable_after_minutes():
    # Minutes of a session are not worth waiting for in a test: the timeline model is
    # plain data fed with engine events, so these events carry made-up times.
    model = TimelineModel(["A", "B", "C", "D"])
    _bar_events(model, "A", 1, 0.0, 0.01)
    _bar_events(model, "A", 2, 30.0, 30.02)
    _bar_events(model, "B", 3, 180.0, None, budget_ms=100)  # B waits, 100 ms budget, three minutes in
    now = int(180.05e9)
    t0, t1, visible = model.window(now)
    assert t1 - t0 <= 1_500_000_000, "the window follows B's wait, not the whole session"
    assert [b.stmt_id for b in visible] == [3]
    width = 120
    line = render_timeline(model, width, now).plain.splitlines()[1]
    bar = line[3:].split("  ")[0]
    assert bar.count("▬") >= 4, f"B's 50 ms so far should be readable: {line!r}"
    assert "┃" in line
    # scrolling back to the start of the session shows A's first statement
    first = render_timeline(model, width, now, View(False, int(0.5e9), int(1e9))).plain.splitlines()
    assert "▬" in first[0] and "▬" not in first[1]
    assert isinstance(visible[0], Bar)


async def test_a_long_lesson_scrolls_rather_than_being_cut(pg_server):
    from lockrace.scenario.library import resolve

    scenario = resolve("pg-lock-timeout")
    async with running_app(size=(80, 24), scenario=scenario, targets={"postgres": pg_server}) as (app, pilot):
        box = app.query_one("#scenario-box")
        bar = app.query_one("#scenario-bar")
        await pilot.pause()
        last_sentence = " ".join(scenario.lesson.split()).rsplit(". ", 1)[-1]
        assert last_sentence in " ".join(str(bar.render()).split()), "the whole lesson is in the bar"
        assert box.region.height <= 2 and box.max_scroll_y > 0, "on a short terminal the bar scrolls"
        box.scroll_end(animate=False)
        await pilot.pause()
        assert box.scroll_y == box.max_scroll_y


async def test_f2_cancels_a_large_fetch(pg_server):
    async with running_app(size=(100, 30), targets={"postgres": pg_server}) as (app, pilot):
        await enter(pilot, app, "C", "SELECT generate_series(1, 500000000) AS n;")
        await until(pilot, lambda: app.panels["C"].status.running is not None, what="C fetching")
        await pilot.pause(0.5)
        assert app.panels["C"].status.running is not None, "the fetch should still run"
        await pilot.press("f2")
        await finished(pilot, app, "C", 1, timeout=5)
        assert app.panels["C"].status.last.outcome == "cancelled"
        assert "57014" in "\n".join(app.panels["C"].lines)


def test_lane_labels_name_several_sessions_in_english():
    """'waits on B and C', not 'B, C' (the same words as the panels and transcripts)."""
    from lockrace.app.timeline import Bar, lane_label

    waiting = Bar("D", 1, "UPDATE jobs SET task = 'x'", 0, None, blocked_since=1, blockers=("B", "C"))
    assert lane_label(waiting, 10)[0] == "waits on B and C"
    done = Bar("D", 1, "SELECT 1", 0, None, end_ns=5_000_000, blocked_since=1, blocked_until=4_000_000,
               blockers=("A", "B", "C"), outcome="ok")
    assert lane_label(done, 10)[0].endswith("waited on A, B and C")
    skipped = Bar("D", 1, "SELECT 1 FOR UPDATE SKIP LOCKED", 0, None, end_ns=1_000_000, outcome="skipped",
                  skipped=2, skipped_from=("A", "B"))
    assert lane_label(skipped, 10)[0].startswith("skipped 2 rows of A and B")


def badge_line(app, session: str) -> tuple[str, int]:
    """What a panel's badge line holds, and how many cells it has."""
    static = app.panels[session].query_one(".badges")
    return static.content.plain, static.size.width


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
async def test_the_badge_line_keeps_what_and_the_transaction_in_sight(pg_server, size):
    """At 80 columns a panel's line is ~37 cells: "BLOCKED by B on accounts id=1
    ExclusiveLock" and "autocommit (no transaction)" do not both fit.  Both stay in sight, the
    activity's details and the transaction's wording cut short; at 160 columns
    both are whole."""
    from rich.cells import cell_len

    async with running_app(size=size, targets={"postgres": pg_server}) as (app, pilot):
        await block_three(app, pilot)
        line, width = badge_line(app, "C")
        assert cell_len(line) <= width, (line, width)
        assert line.lstrip().startswith("BLOCKED by "), line
        assert ("autocommit (no transaction)" if size[0] >= 160 else "autocommit") in line, line
        app.panels["C"].input.focus()
        await pilot.pause()
        await pilot.press("f2")  # cancel C's wait
        await until(pilot, lambda: app.panels["C"].status.running is None, what="C cancelled")
        await enter(pilot, app, "C", "BEGIN;")
        await enter(pilot, app, "C", "SET LOCAL lock_timeout = '50ms';")
        await enter(pilot, app, "C", "UPDATE accounts SET balance = 3 WHERE id = 1;")
        await until(pilot, lambda: app.panels["C"].status.txn == "failed transaction", what="C's transaction failed")
        await pilot.pause(0.1)
        line, width = badge_line(app, "C")
        assert cell_len(line) <= width, (line, width)
        assert line.lstrip().startswith("timed out"), line
        assert ("failed transaction (ROLLBACK needed)" if size[0] >= 160 else "ROLLBACK needed") in line, line


def test_a_cut_badge_line_keeps_who_blocks_and_what_happened():
    """The fitting alone (no server): at a 2x2 panel's 37 cells a foreign blocker's
    pid stays whole (the activity's short form is never cut), a timeout keeps
    as much of its budget as fits, and a line that fits is left alone."""
    from rich.cells import cell_len

    from lockrace.app.session_panel import badge_line
    from lockrace.app.status import Badge

    autocommit = Badge("idle", "autocommit (no transaction)", "autocommit")
    foreign = Badge("blocked", "BLOCKED by client pid 23509 on table accounts AccessExclusiveLock",
                    "BLOCKED by client pid 23509")
    line = badge_line(foreign, autocommit, 37).plain
    assert "BLOCKED by client pid 23509 " in line and cell_len(line) <= 37, line
    timed_out = Badge("timed out", "timed out (300 ms lock_timeout)", "timed out")
    line = badge_line(timed_out, Badge("idle", "idle"), 37).plain
    assert line.startswith(" timed out (300 ms") and line.rstrip().endswith("idle") and cell_len(line) <= 37, line
    line = badge_line(foreign, autocommit, 120).plain
    assert line == " BLOCKED by client pid 23509 on table accounts AccessExclusiveLock   autocommit (no transaction) "
