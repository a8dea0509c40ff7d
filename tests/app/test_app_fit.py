"""The screen keeps up with the terminal: a resize lays out for the new size, the
footer shows the keys that matter at 80 columns and every key at 120, the header's
text is never cut mid-word, the timeline stays readable with budgets of a day or a
year, lock details are never cut at 120 columns and keep the mode at 80, each
panel's title shows its backend's pid, and the lock view (F12) draws who holds
and who waits (real sessions on the embedded PostgreSQL and a private MariaDB)."""

from __future__ import annotations

import re

import pytest

from lockrace.app.keys_footer import KeysFooter
from lockrace.app.lock_view import LockView
from lockrace.app.wait_graph import draw_graph
from lockrace.engine.lock_graph import lock_graph
from lockrace.app.status import budget_words
from lockrace.app.timeline import TimelineModel, render_timeline
from lockrace.render.transcript import duration_words
from lockrace.core.events import (Budget, LockInfo, StatementBlocked, StatementFinished, StatementResult,
                                  StatementStarted)
from textual.widgets import Header

from support.flavor import private_mysql_flavor
from support.app import badge, enter, finished, running_app, until


def screen_text(app) -> str:
    """The screen as the terminal shows it, one string per row."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def footer_line(app) -> str:
    return screen_text(app).splitlines()[-1]


async def test_a_resize_lays_out_for_the_new_size(pg_server):
    async with running_app(size=(80, 24), targets={"postgres": pg_server}) as (app, pilot):
        header = app.query_one(Header)
        assert not header.display and app.timeline.compact
        narrow = app.timeline.render().plain.splitlines()[0]
        await pilot.resize_terminal(120, 40)
        await pilot.pause(0.2)
        assert header.display, "120x40 has room for the header"
        assert not app.timeline.compact, "120x40 has room for the timeline's two-line axis"
        wide = app.timeline.render().plain.splitlines()[0]
        assert len(wide.rstrip()) > len(narrow.rstrip()) + 20, (narrow, wide)
        assert app.timeline.region.width == 120
        await pilot.resize_terminal(80, 24)
        await pilot.pause(0.2)
        assert not header.display and app.timeline.compact
        assert len(app.timeline.render().plain.splitlines()[0].rstrip()) < len(wide.rstrip())


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
async def test_the_footer_shows_the_keys_a_user_needs(pg_server, size):
    async with running_app(size=size, targets={"postgres": pg_server}) as (app, pilot):
        await pilot.pause(0.1)
        line = footer_line(app)
        for key in ("F1 Help", "F5 Step", "F9 Scenarios", "F12 Locks", "^S Save", "^Q Quit"):
            assert key in line, f"{key!r} missing from the footer at {size}: {line!r}"
        if size[0] >= 120:
            for key in ("F2", "F3", "F4", "F6", "F7", "F8", "F10"):
                assert f"{key} " in line, f"{key} missing from the footer at {size}: {line!r}"
        assert len(line.rstrip()) <= size[0]


async def test_a_footer_key_runs_on_click(pg_server):
    async with running_app(size=(80, 24), targets={"postgres": pg_server}) as (app, pilot):
        at = footer_line(app).index("F1 Help")
        await pilot.click(KeysFooter, offset=(at + 1, 0))
        await pilot.pause(0.1)
        assert type(app.screen).__name__ == "HelpScreen"


@pytest.mark.parametrize("size", [(80, 24), (100, 28)], ids=["80x24", "100x28"])
async def test_the_header_text_is_not_cut_mid_word(pg_server, size):
    """Below 30 rows the header's text is the timeline's title, and the free-form hint
    has two lines: each says whole parts, never a word cut by the border."""
    async with running_app(size=size, targets={"postgres": pg_server}) as (app, pilot):
        await pilot.pause(0.1)
        rows = screen_text(app).splitlines()
        title_row = next(r for r in rows if "PostgreSQL" in r and "─" in r)
        title = title_row.strip("─╭╮ ").strip()
        assert title.startswith("PostgreSQL"), title_row
        for part in title.split(" · "):
            assert part in app.sub_title or part == "▬ running █ blocked ┃ budget", (part, title_row)
        bar = app._bar_shown[1]
        assert bar.rstrip().endswith((".", ";")), f"the hint ends mid-sentence: {bar!r}"
        box = app.query_one("#scenario-box")
        assert box.virtual_size.height <= box.region.height, "the hint does not fit its lines"


# ---------------------------------------------------------------- the timeline

def blocked_bar(budget: Budget, waited_s: float = 5.0, now: int = 10**12) -> tuple[TimelineModel, int]:
    model = TimelineModel(["A", "B"])
    start = now - int(waited_s * 1e9)
    model.apply(StatementStarted("A", start - 10**9, 1, "BEGIN", None))
    model.apply(StatementFinished("A", start - 10**9 + 10**6, 1, "BEGIN", StatementResult("ok")))
    model.apply(StatementStarted("B", start, 2, "ALTER TABLE accounts ADD c int", budget))
    model.apply(StatementBlocked("B", start + 10**6, 2, ("A",), LockInfo("metadata", "", "accounts")))
    return model, now


@pytest.mark.parametrize("budget,words", [(Budget("lock_wait_timeout", 86400_000.0), "1 day"),
                                          (Budget("lock_wait_timeout", 31536000_000.0), "1 year")],
                         ids=["mariadb-1-day", "mysql-1-year"])
@pytest.mark.parametrize("compact", [False, True], ids=["two-line-axis", "compact"])
def test_a_budget_of_a_day_or_a_year_keeps_the_axis_readable(budget, words, compact):
    model, now = blocked_bar(budget)
    lines = render_timeline(model, 120, now, compact=compact).plain.splitlines()
    lane_b = lines[1]
    assert lane_b.count("█") >= 20, f"B's bar is gone: {lane_b!r}"
    assert f"budget {words}, off the chart" in lane_b, lane_b
    assert "»" in lane_b
    axis = lines[2]
    assert "┴┴" not in axis, axis
    if compact:
        labels = [part for part in axis.split("┴")[1:] if part.strip("─ ")]
        assert labels and all(part[0] != "─" for part in labels), axis
    else:
        marks = [i for i, ch in enumerate(axis) if ch == "┴"]
        below = lines[3]
        starts = [m.start() for m in re.finditer(r"\S+(?: \S+)*", below)]
        assert 2 <= len(marks) <= 12, axis
        assert starts == marks[: len(starts)] and len(starts) >= len(marks) - 1, (axis, below)
    for text in lines[2:]:
        assert "e+" not in text and "86400" not in text, text


def test_a_near_budget_still_draws_its_marker_on_the_chart():
    model, now = blocked_bar(Budget("innodb_lock_wait_timeout", 50_000.0))
    lane_b = render_timeline(model, 120, now).plain.splitlines()[1]
    assert "┃" in lane_b and "off the chart" not in lane_b


def test_the_step_a_scenario_is_about_stays_in_view():
    """B waited and timed out; a later step's statement (A's COMMIT, 1.5 s on) is what
    the learner just ran: the window after the action keeps it."""
    model = TimelineModel(["A", "B"])
    s = 10**12
    model.apply(StatementStarted("A", s, 1, "UPDATE accounts SET balance = 1 WHERE id = 1", None))
    model.apply(StatementFinished("A", s + 10**6, 1, "UPDATE", StatementResult("ok")))
    model.apply(StatementStarted("B", s + 10**8, 2, "UPDATE accounts SET balance = 2 WHERE id = 1",
                                 Budget("lock_timeout", 100.0)))
    model.apply(StatementBlocked("B", s + 10**8 + 10**6, 2, ("A",), LockInfo("transactionid", "ShareLock", "accounts")))
    model.apply(StatementFinished("B", s + 2 * 10**8, 2, "UPDATE", StatementResult("timed_out")))
    commit = s + 17 * 10**8
    model.apply(StatementStarted("A", commit, 3, "COMMIT", None))
    model.apply(StatementFinished("A", commit + 10**6, 3, "COMMIT", StatementResult("ok")))
    t0, t1 = model.follow_window(commit + 10**9)
    assert t0 <= commit and commit + 10**6 <= t1, "A's COMMIT is out of view"
    assert t0 <= s + 10**8, "B's wait is out of view"


async def test_the_timeline_title_follows_the_key_just_pressed_and_shows_focus(pg_server):
    async with running_app(size=(120, 40), targets={"postgres": pg_server}) as (app, pilot):
        await enter(pilot, app, "A", "SELECT 1;")
        await finished(pilot, app, "A", 1)
        app.timeline.focus()
        await pilot.pause(0.1)
        assert "focused" in screen_text(app), "the focused timeline does not say so"
        await pilot.press("left")
        await pilot.pause(0.05)
        assert "history" in screen_text(app), "the title still says what it showed before Left"
        await pilot.press("end")
        await pilot.pause(0.05)
        text = screen_text(app)
        assert "history" not in text and "following the action" in text
        app.query_one("#input-A").focus()
        await pilot.pause(0.1)
        assert "focused" not in screen_text(app)


def test_durations_read_as_words():
    assert [duration_words(ms) for ms in (100, 1500, 50_000, 300_000, 5_400_000, 86_400_000, 31_536_000_000)] == \
        ["100 ms", "1.5 s", "50 s", "5 min", "1 h 30 min", "1 day", "1 year"]
    assert budget_words(Budget("lock_wait_timeout", 86_400_000.0)) == "1 day lock_wait_timeout"


async def test_a_metadata_lock_wait_shows_lock_wait_timeout_while_waiting(mysql_server):
    async with running_app(size=(160, 48), engine="mysql", targets={"mysql": mysql_server}) as (app, pilot):
        await enter(pilot, app, "A", "LOCK TABLES accounts WRITE;")
        await finished(pilot, app, "A", 1)
        # a plain UPDATE: it starts with innodb_lock_wait_timeout as its budget, and the server
        # then reports it waiting for the table's metadata lock, which lock_wait_timeout bounds
        await enter(pilot, app, "B", "UPDATE accounts SET balance = 5 WHERE id = 1;")
        await until(pilot, lambda: badge(app, "B").startswith("BLOCKED by"), what="B blocked", timeout=15)
        await pilot.pause(0.3)
        line = app.panels["B"].status.wait_line()
        assert "lock_wait_timeout" in line and "innodb" not in line, line
        default = "1 year" if private_mysql_flavor() == "mysql" else "1 day"  # lock_wait_timeout's default
        assert default in line, line
        text = screen_text(app)
        assert "waiting" in text and f"{default} lock_wait_timeout" in text
        assert "off the chart" in text, "the timeline says where the day-long budget is"
        await enter(pilot, app, "A", "UNLOCK TABLES;")
        await finished(pilot, app, "B", 1, timeout=15)


# ---------------------------------------------------------------- lock details and titles

def panel_rows(app, session: str) -> list[str]:
    """The screen rows inside session's panel (between its borders)."""
    region = app.panels[session].region
    rows = screen_text(app).splitlines()[region.y + 1: region.bottom - 1]
    return [row[region.x + 1: region.right - 1] for row in rows]


@pytest.mark.parametrize("engine", ["postgres", "mysql"])
@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 60)], ids=["80x24", "120x40", "200x60"])
async def test_lock_details_are_whole_from_120_columns_and_keep_the_mode_at_80(
        request, engine, size):
    server = request.getfixturevalue("pg_server" if engine == "postgres" else "mysql_server")
    async with running_app(size=size, engine=engine, targets={engine: server}) as (app, pilot):
        await enter(pilot, app, "A", "BEGIN;")
        await enter(pilot, app, "A", "UPDATE accounts SET balance = 1 WHERE id = 1;")
        await finished(pilot, app, "A", 2)
        await enter(pilot, app, "B", "UPDATE accounts SET balance = 2 WHERE id = 1;")
        await until(pilot, lambda: badge(app, "B").startswith("BLOCKED by"), what="B blocked", timeout=15)
        await until(pilot, lambda: app.panels["B"].status.running.lock is not None, what="B's lock")
        await pilot.pause(0.3)
        lock = app.panels["B"].status.running.lock
        rows = panel_rows(app, "B")
        inside = " ".join(r.strip() for r in rows)
        if size[0] >= 120:
            assert lock.describe() in inside, (lock.describe(), rows)
            assert "…" not in inside, rows
            lanes = render_timeline(app.timeline_model, app.timeline.content_size.width, app.timeline.clock()).plain
            lane_b = next(line for line in lanes.splitlines() if line.startswith(" B "))
            assert lock.describe() in lane_b, lane_b
        assert lock.mode and lock.mode in inside, (lock.mode, rows)
        # the title names the backend: the id pg_stat_activity / SHOW PROCESSLIST know it by
        ident = app.race.sessions["B"].ident
        word = "pid" if engine == "postgres" else "thread"
        assert app.panels["B"].border_title == f"Session B · {word} {ident}"
        assert f"{word} {ident}" in screen_text(app)
        await enter(pilot, app, "A", "ROLLBACK;")
        await finished(pilot, app, "B", 1, timeout=15)


# ---------------------------------------------------------------- the lock view (F12)

async def open_locks(app, pilot):
    await pilot.press("f12")
    await until(pilot, lambda: isinstance(app.screen, LockView), what="the lock view")
    await pilot.pause(0.2)


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
async def test_the_lock_view_draws_who_holds_and_who_waits_live(pg_server, size):
    async with running_app(size=size, targets={"postgres": pg_server}) as (app, pilot):
        await enter(pilot, app, "A", "BEGIN;")
        await enter(pilot, app, "A", "UPDATE accounts SET balance = 1 WHERE id = 1;")
        await finished(pilot, app, "A", 2)
        await open_locks(app, pilot)
        assert "Nobody waits" in screen_text(app)
        # typed in the panel before, still live here: B and C queue up while the view is open
        app.pop_screen()
        await pilot.pause(0.1)
        await enter(pilot, app, "B", "UPDATE accounts SET balance = 2 WHERE id = 1;")
        await enter(pilot, app, "C", "BEGIN; LOCK TABLE accounts;")
        await open_locks(app, pilot)
        await until(pilot, lambda: "C · pid" in screen_text(app) and "▶" in screen_text(app), what="the graph")
        await until(pilot, lambda: len(app.race.sessions["C"].running.blockers) == 2, what="C behind A and B")
        await pilot.pause(0.6)
        text = screen_text(app)
        ids = {name: app.race.sessions[name].ident for name in "ABC"}
        for name, ident in ids.items():
            assert f"{name} · pid {ident}" in text, (name, text)
        graph = lock_graph(app.race)
        assert {(w.waiter, w.blocker) for w in graph.waits} == {("B", "A"), ("C", "A"), ("C", "B")}
        assert "accounts id=1 (B waits for it)" in graph.node("A").holds
        drawn = draw_graph(graph, size[0] - 2).plain
        assert drawn.count("╭─") + drawn.count("┏━") == 3 and "▶" in drawn and "▲" in drawn, drawn
        assert "waits" in text
        await pilot.press("escape")
        await pilot.pause(0.1)
        assert not isinstance(app.screen, LockView)
        await enter(pilot, app, "A", "ROLLBACK;")
        await finished(pilot, app, "B", 1)
        await open_locks(app, pilot)
        await until(pilot, lambda: "Nobody waits" in screen_text(app), what="the graph emptied")
        await pilot.press("f12")
        await pilot.pause(0.1)
        assert not isinstance(app.screen, LockView)


async def test_the_lock_view_highlights_a_deadlocks_cycle(pg_server):
    async with running_app(size=(160, 48), targets={"postgres": pg_server}) as (app, pilot):
        for name, row in (("A", 1), ("B", 2)):
            await enter(pilot, app, name, "BEGIN;")
            await enter(pilot, app, name, f"UPDATE accounts SET balance = 0 WHERE id = {row};")
            await finished(pilot, app, name, 2)
        await enter(pilot, app, "B", "SET deadlock_timeout = '3s';")
        await finished(pilot, app, "B", 3)
        await enter(pilot, app, "A", "UPDATE accounts SET balance = 1 WHERE id = 2;")
        await until(pilot, lambda: badge(app, "A").startswith("BLOCKED"), what="A blocked")
        await open_locks(app, pilot)
        await enter(pilot, app, "B", "UPDATE accounts SET balance = 2 WHERE id = 1;")
        # both wait, each for the other, until a deadlock_timeout passes: the cycle is drawn live
        await until(pilot, lambda: "deadlock cycle: A → B → A" in screen_text(app), timeout=5, what="live cycle")
        await until(pilot, lambda: any(app.panels[n].status.last is not None and
                                       app.panels[n].status.last.outcome == "deadlock" for n in "AB"),
                    timeout=15, what="the server to break the cycle")
        await pilot.pause(0.7)
        cycle, victim = app.last_deadlock
        assert cycle == ("A", "B") and victim in "AB"
        text = screen_text(app)
        assert "deadlock cycle: A → B → A" in text and f"the server failed {victim}'s statement" in text, text
        assert "┏━" in text, "the cycle's boxes are drawn heavy"
        await pilot.press("escape")
        for name in "AB":
            await enter(pilot, app, name, "ROLLBACK;")


async def test_the_lock_view_shows_a_client_outside_the_race(pg_server):
    async with running_app(size=(120, 40), targets={"postgres": pg_server}) as (app, pilot):
        sandbox = app.pool.targets["postgres"].sandbox
        import psycopg

        foreign = psycopg.connect(pg_server.conninfo, autocommit=True)
        try:
            pid = foreign.info.backend_pid
            foreign.execute("BEGIN")
            foreign.execute(f'LOCK TABLE "{sandbox}".accounts IN ACCESS EXCLUSIVE MODE')
            await enter(pilot, app, "B", "SELECT * FROM accounts;")
            await until(pilot, lambda: badge(app, "B").startswith("BLOCKED"), what="B blocked", timeout=15)
            await open_locks(app, pilot)
            await pilot.pause(0.6)
            text = screen_text(app)
            assert f"pid {pid}" in text and "not in the race" in text, text
            graph = lock_graph(app.race)
            assert graph.node(f"pid {pid}").foreign and graph.blockers_of("B") == [f"pid {pid}"]
        finally:
            foreign.execute("ROLLBACK")
            foreign.close()
        await finished(pilot, app, "B", 1)


# ---------------------------------------------------------------- what terminal SQL users expect

async def test_history_is_kept_across_runs_per_engine(pg_server, tmp_path):
    async with running_app(size=(120, 40), targets={"postgres": pg_server}, history_dir=tmp_path) as (app, pilot):
        await enter(pilot, app, "A", "SELECT 41 AS answer;")
        await finished(pilot, app, "A", 1)
        await enter(pilot, app, "B", "SELECT 'second\nline' AS two;")
        await finished(pilot, app, "B", 1)
        await pilot.pause(0.2)
    assert (tmp_path / "history-postgres").exists()
    async with running_app(size=(120, 40), targets={"postgres": pg_server}, history_dir=tmp_path) as (app, pilot):
        field = app.panels["C"].input
        field.focus()
        await pilot.pause()
        await pilot.press("up")
        assert field.value == "SELECT 'second\nline' AS two;"
        await pilot.press("up")
        assert field.value == "SELECT 41 AS answer;"
        await pilot.press("down", "down")
        assert field.value == ""


def segment_style(app, needle: str):
    """The style of the first screen segment holding ``needle``."""
    for strip in app.screen._compositor.render_strips():
        for segment in strip:
            if needle in segment.text:
                return segment.style
    raise AssertionError(f"{needle!r} is not on the screen")


async def test_sql_is_highlighted_in_the_input_and_the_editor(pg_server):
    async with running_app(size=(120, 40), targets={"postgres": pg_server}) as (app, pilot):
        field = app.panels["A"].input
        field.focus()
        field.value = "SELECT 'x' FROM accounts"
        await pilot.pause(0.1)
        keyword, string, table = (segment_style(app, w) for w in ("SELECT", "'x'", "accounts"))
        assert keyword.bold and keyword != table and string.color != table.color, (keyword, string, table)
        field.value = ""
        await pilot.press("ctrl+n")
        await pilot.pause(0.2)
        area = app.screen.query_one("#editor-area")
        area.insert("UPDATE jobs SET task = 'x' WHERE id = 1")
        await pilot.pause(0.1)
        kinds = {name for _, _, name in area._highlights[0]}
        assert {"keyword", "string", "number"} <= kinds, area._highlights[0]
        assert segment_style(app, "UPDATE").color != segment_style(app, " jobs ").color
        await pilot.press("escape")


async def test_ctrl_space_completes_sandbox_names_and_tab_still_switches_panels(pg_server):
    async with running_app(size=(120, 40), targets={"postgres": pg_server}) as (app, pilot):
        field = app.panels["A"].input
        field.focus()
        await pilot.pause()
        await pilot.press(*"SELECT bal")
        await pilot.press("ctrl+@")
        assert field.value == "SELECT balance "
        await pilot.press(*"FROM acc")
        await pilot.press("ctrl+@")
        assert field.value == "SELECT balance FROM accounts "
        await enter(pilot, app, "A", "CREATE TABLE ledger (entry_id int, amount int);")
        await finished(pilot, app, "A", 1)
        field.focus()
        field.value = "SELECT entr"
        field.cursor_position = len(field.value)
        await pilot.press("ctrl+@")
        assert field.value == "SELECT entry_id "
        await pilot.press("tab")
        await pilot.pause()
        assert app.focused is app.panels["B"].input


async def test_a_panels_result_and_whole_log_copy_to_the_clipboard(pg_server):
    async with running_app(size=(120, 40), targets={"postgres": pg_server}) as (app, pilot):
        await enter(pilot, app, "A", "SELECT 1 AS one;")
        await finished(pilot, app, "A", 1)
        await enter(pilot, app, "A", "SELECT 2 AS two;")
        await finished(pilot, app, "A", 2)
        app.panels["A"].input.focus()
        await pilot.pause()
        await pilot.press("ctrl+y")
        await pilot.pause()
        assert app.clipboard.startswith("A> SELECT 2 AS two;") and " two" in app.clipboard
        assert "SELECT 1" not in app.clipboard
        await pilot.press("alt+y")
        await pilot.pause()
        assert "A> SELECT 1 AS one;" in app.clipboard and "A> SELECT 2 AS two;" in app.clipboard


async def test_a_wide_result_scrolls_sideways_instead_of_wrapping(pg_server):
    async with running_app(size=(80, 24), targets={"postgres": pg_server}) as (app, pilot):
        await enter(pilot, app, "A", "SELECT 1 AS id, repeat('x', 120) AS wide, 'end' AS last;")
        await finished(pilot, app, "A", 1)
        await until(pilot, lambda: not app.panels["A"].drawing, what="the result drawn")
        await pilot.pause(0.1)
        log = app.panels["A"].transcript
        assert log.virtual_size.width > 120 > log.size.width, (log.virtual_size, log.size)
        rows = [strip.text for strip in log.lines]
        header = [r for r in rows if "wide" in r and "last" in r]
        assert header, f"the header is wrapped: {rows}"
        field = app.panels["A"].input
        field.focus()
        await pilot.pause()
        await pilot.press("alt+right")
        await pilot.pause()
        assert log.scroll_x > 0
        await pilot.press("alt+left", "alt+left", "alt+left", "alt+left")
        await pilot.pause()
        assert log.scroll_x == 0


async def test_a_resize_rewraps_each_transcript_and_keeps_its_end_in_view(pg_server):
    async with running_app(size=(200, 60), targets={"postgres": pg_server}) as (app, pilot):
        for i in range(6):
            await enter(pilot, app, "A", f"SELECT {i} AS n, 'a line that is long enough to wrap at eighty' AS words;")
            await finished(pilot, app, "A", i + 1)
        await until(pilot, lambda: not app.panels["A"].drawing, what="A drawn")
        await pilot.resize_terminal(80, 24)
        await pilot.pause(0.3)
        await until(pilot, lambda: not app.panels["A"].drawing, what="A redrawn")
        await pilot.pause(0.2)
        log = app.panels["A"].transcript
        rows = panel_rows(app, "A")
        assert any("ok in" in r for r in rows), f"the transcript's end is out of view: {rows}"
        assert max(len(strip.text.rstrip()) for strip in log.lines if strip.text.startswith("-- ")) <= log.size.width


async def test_the_lock_view_on_mariadb_names_threads_and_metadata_locks(mysql_server):
    async with running_app(size=(160, 48), engine="mysql", targets={"mysql": mysql_server}) as (app, pilot):
        await enter(pilot, app, "A", "BEGIN;")
        await enter(pilot, app, "A", "UPDATE accounts SET balance = 1 WHERE id = 1;")
        await finished(pilot, app, "A", 2)
        await enter(pilot, app, "B", "UPDATE accounts SET balance = 2 WHERE id = 1;")
        await until(pilot, lambda: badge(app, "B").startswith("BLOCKED"), what="B blocked", timeout=15)
        await enter(pilot, app, "C", "ALTER TABLE accounts ADD COLUMN note int;")
        await until(pilot, lambda: badge(app, "C").startswith("BLOCKED"), what="C blocked", timeout=15)
        await open_locks(app, pilot)
        await pilot.pause(0.6)
        text = screen_text(app)
        for name in "ABC":
            assert f"{name} · thread {app.race.sessions[name].ident}" in text, text
        graph = lock_graph(app.race)
        assert ("B", "A") in {(w.waiter, w.blocker) for w in graph.waits}
        assert "A" in graph.blockers_of("C") and "metadata lock on accounts" in text
        assert "metadata lock on accounts" in " ".join(graph.node("A").holds)
        await pilot.press("escape")
        await enter(pilot, app, "A", "ROLLBACK;")
        await finished(pilot, app, "C", 1, timeout=15)


async def test_a_blocked_panel_keeps_the_waiting_statement_in_view_at_80x24(pg_server):
    # the wait and lock lines take rows from the transcript: its end (the statement that waits) stays shown
    async with running_app(size=(80, 24), targets={"postgres": pg_server}) as (app, pilot):
        await enter(pilot, app, "A", "BEGIN;")
        await enter(pilot, app, "A", "UPDATE accounts SET balance = 1 WHERE id = 1;")
        await finished(pilot, app, "A", 2)
        await enter(pilot, app, "B", "SELECT 1 AS one;")
        await finished(pilot, app, "B", 1)
        await enter(pilot, app, "B", "UPDATE accounts SET balance = 2 WHERE id = 1;")
        await until(pilot, lambda: badge(app, "B").startswith("BLOCKED by"), what="B blocked", timeout=15)
        await until(pilot, lambda: app.panels["B"].status.running.lock is not None, what="B's lock")
        await pilot.pause(0.5)
        rows = panel_rows(app, "B")
        assert any("WHERE id" in r or "B> UPDATE" in r for r in rows), f"the waiting statement is out of view: {rows}"
        await enter(pilot, app, "A", "ROLLBACK;")
        await finished(pilot, app, "B", 2, timeout=15)
