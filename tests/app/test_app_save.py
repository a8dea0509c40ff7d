"""Ctrl+S: a dialog asks where (a default in the current directory, overwrite
only when confirmed), and the saved .txt is exactly what ``lockrace run``
prints for the saved .race: one writer for both."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

from lockrace.app.save_dialog import SaveDialog

from support.app import badge, enter, finished, running_app, until
from support.paths import REPO

# measured times, and the transaction ids a deadlock's DETAIL names (new on every run)
TIMES = re.compile(r"\d+(\.\d+)? (ms|s)\b|(?<=transaction )\d+")


async def lockrace_run(race: Path) -> tuple[int, str]:
    """``lockrace run FILE`` as a user runs it (its own server, or LOCKRACE_PG_DSN when set, like the app's)."""
    env = dict(os.environ, LOCKRACE_SANDBOX=os.environ.get("LOCKRACE_SANDBOX", "lockrace_save_test"))
    out = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "lockrace", "run", str(race)],
                                  capture_output=True, text=True, cwd=REPO, timeout=120, env=env)
    return out.returncode, out.stdout


async def save_through_dialog(app, pilot, path: Path) -> None:
    await pilot.press("ctrl+s")
    await until(pilot, lambda: isinstance(app.screen, SaveDialog), what="save dialog")
    line = app.screen.query_one("#save-path")
    line.value = str(path)
    await pilot.press("enter")
    await until(pilot, lambda: not isinstance(app.screen, SaveDialog), what="dialog closed")


async def test_ctrl_s_asks_where_with_a_default_in_the_current_directory(pg_server, tmp_path):
    async with running_app(targets={"postgres": pg_server}, save_dir=tmp_path) as (app, pilot):
        await enter(pilot, app, "A", "SELECT 1 AS one;")
        await finished(pilot, app, "A", 1)
        await pilot.press("ctrl+s")
        await until(pilot, lambda: isinstance(app.screen, SaveDialog), what="save dialog")
        assert list(tmp_path.iterdir()) == []  # nothing written before the user says where
        default = Path(app.screen.query_one("#save-path").value)
        assert default.parent == tmp_path and default.suffix == ".race"
        assert default.name.startswith("lockrace-postgres-")
        await pilot.press("escape")  # Esc saves nothing
        assert list(tmp_path.iterdir()) == []
        # an existing file is overwritten only after a second Enter
        target = tmp_path / "mine.race"
        target.write_text("keep me\n")
        await pilot.press("ctrl+s")
        await until(pilot, lambda: isinstance(app.screen, SaveDialog), what="save dialog")
        app.screen.query_one("#save-path").value = str(tmp_path / "mine")
        await pilot.press("enter")
        assert isinstance(app.screen, SaveDialog)
        assert "already exists" in str(app.screen.query_one("#save-note").render())
        assert target.read_text() == "keep me\n"
        await pilot.press("enter")
        await until(pilot, lambda: not isinstance(app.screen, SaveDialog), what="dialog closed")
        assert target.read_text().startswith("title: Recorded race")
        assert (tmp_path / "mine.txt").exists()


async def test_saved_transcript_is_what_lockrace_run_prints(pg_server, tmp_path):
    """A race with no wait in it prints no timing at all: the two must match byte for byte."""
    async with running_app(targets={"postgres": pg_server}, save_dir=tmp_path) as (app, pilot):
        await enter(pilot, app, "A", "SELECT id, balance FROM accounts ORDER BY id;")
        await finished(pilot, app, "A", 1)
        await enter(pilot, app, "B", "BEGIN;")
        await finished(pilot, app, "B", 1)
        await enter(pilot, app, "B", "UPDATE accounts SET balance = 5 WHERE id = 2;")
        await finished(pilot, app, "B", 2)
        await enter(pilot, app, "B", "COMMIT;")
        await finished(pilot, app, "B", 3)
        await enter(pilot, app, "C", "SELECT balance FROM accounts WHERE id = 2;")
        await finished(pilot, app, "C", 1)
        await save_through_dialog(app, pilot, tmp_path / "calm.race")
    saved = (tmp_path / "calm.txt").read_bytes()
    code, printed = await lockrace_run(tmp_path / "calm.race")
    assert code == 0
    assert saved == printed.encode()
    assert b"A> SELECT id, balance FROM accounts ORDER BY id;\n" in saved  # the ';' as typed
    assert b"Verified against PostgreSQL 18" in saved


async def test_saved_transcript_of_a_wait_matches_but_for_the_timings(pg_server, tmp_path):
    """B blocked by A: same lines, same order, same lock (named by its key); only measured times differ."""
    async with running_app(targets={"postgres": pg_server}, save_dir=tmp_path) as (app, pilot):
        await enter(pilot, app, "A", "BEGIN;")
        await enter(pilot, app, "A", "UPDATE accounts SET balance = balance - 10 WHERE id = 1;")
        await finished(pilot, app, "A", 2)
        await enter(pilot, app, "B", "UPDATE accounts SET balance = balance + 10 WHERE id = 1;")
        await until(pilot, lambda: badge(app, "B").startswith("BLOCKED"), what="B blocked")
        await enter(pilot, app, "A", "COMMIT;")
        await finished(pilot, app, "B", 1)
        await finished(pilot, app, "A", 3)
        await save_through_dialog(app, pilot, tmp_path / "wait.race")
    saved = (tmp_path / "wait.txt").read_text()
    code, printed = await lockrace_run(tmp_path / "wait.race")
    assert code == 0, printed
    assert "-- B is blocked by A on accounts id=1 ShareLock" in saved
    assert "B> <... completed step 3>" in saved
    assert TIMES.sub("T", saved) == TIMES.sub("T", printed)


async def test_saved_deadlock_replays_with_the_same_transcript(pg_server, tmp_path):
    """A deadlock typed in the app: the victim ends only after the statement that closed the
    cycle, so the saved race lets that one run first, and ``lockrace run`` verifies it.
    deadlock_timeout is 3 s in both sessions: B's statement, typed key by key after A
    blocks, must wait long enough to be seen blocked however slowly the keys go in (a
    loaded machine took most of the default 1 s)."""
    async with running_app(targets={"postgres": pg_server}, save_dir=tmp_path) as (app, pilot):
        for session, sql in (("A", "SET deadlock_timeout = '3s';"), ("B", "SET deadlock_timeout = '3s';"),
                             ("A", "BEGIN;"), ("B", "BEGIN;"), ("A", "UPDATE accounts SET balance = 1 WHERE id = 1;"),
                             ("B", "UPDATE accounts SET balance = 2 WHERE id = 2;")):
            await enter(pilot, app, session, sql)
            await finished(pilot, app, session, app.panels[session].status.statements)
        await enter(pilot, app, "A", "UPDATE accounts SET balance = 3 WHERE id = 2;")
        await until(pilot, lambda: badge(app, "A").startswith("BLOCKED"), what="A blocked")
        await enter(pilot, app, "B", "UPDATE accounts SET balance = 4 WHERE id = 1;")
        await finished(pilot, app, "A", 4)
        await finished(pilot, app, "B", 4)
        outcomes = sorted(app.panels[s].status.last.outcome for s in "AB")
        assert outcomes == ["deadlock", "ok"]
        await save_through_dialog(app, pilot, tmp_path / "cycle.race")
    saved = (tmp_path / "cycle.txt").read_text()
    code, printed = await lockrace_run(tmp_path / "cycle.race")
    assert code == 0, printed
    assert "ERROR: 40P01: deadlock detected" in saved
    assert TIMES.sub("T", saved) == TIMES.sub("T", printed)


async def test_pg_deadlock_played_in_the_app_replays_with_the_same_verdicts(pg_server, tmp_path):
    """The built-in pg-deadlock stepped in the app (F5, then F6 to the end), saved with Ctrl+S:
    ``lockrace run`` of the saved race passes, with the same outcome for every statement
    (the victim's 40P01 included) and the same transcript but for measured times."""
    from lockrace.scenario.library import resolve
    from lockrace.scenario.text_format import read_scenario

    scenario = resolve("pg-deadlock")
    async with running_app(targets={"postgres": pg_server}, scenario=scenario, save_dir=tmp_path) as (app, pilot):
        player = app.player
        await pilot.press("f5")
        await until(pilot, lambda: player.position == 1 and not player.busy, what="first step")
        await pilot.press("f6")
        await until(pilot, lambda: player.finished, timeout=30, what="scenario end")
        assert [f for r in player.records for f in r.failures] == []
        played = [(r.step.session, r.result.outcome) for r in player.records]
        assert ("A", "deadlock") in played
        await save_through_dialog(app, pilot, tmp_path / "played.race")
    saved = read_scenario(tmp_path / "played.race")
    replayed = []
    for step in saved.steps:
        outcome = [e.value for e in step.applicable("postgres") if e.key == "outcome"]
        replayed.append((step.session, outcome[0] if outcome else "ok"))
    assert replayed == played
    code, printed = await lockrace_run(tmp_path / "played.race")
    assert code == 0, printed
    assert "ERROR: 40P01: deadlock detected" in printed
    assert TIMES.sub("T", (tmp_path / "played.txt").read_text()) == TIMES.sub("T", printed)


async def test_panel_and_transcript_annotate_a_timeout_in_the_same_words(pg_server, tmp_path):
    """One writer for lockrace's note after a result: the line B's panel shows after its
    lock_timeout is the line the saved transcript (and ``lockrace run``) prints."""
    async with running_app(targets={"postgres": pg_server}, save_dir=tmp_path) as (app, pilot):
        for session, sql in (("A", "BEGIN;"), ("A", "UPDATE accounts SET balance = 1 WHERE id = 1;"),
                             ("B", "SET lock_timeout = '100ms';")):
            await enter(pilot, app, session, sql)
            await finished(pilot, app, session, app.panels[session].status.statements)
        await enter(pilot, app, "B", "UPDATE accounts SET balance = 2 WHERE id = 1;")
        await finished(pilot, app, "B", 2)
        assert app.panels["B"].status.last.outcome == "timed_out"
        shown = [line for line in app.logs["B"].lines if line.startswith("-- timed out")]
        await save_through_dialog(app, pilot, tmp_path / "timeout.race")
    saved = [line for line in (tmp_path / "timeout.txt").read_text().splitlines() if line.startswith("-- timed out")]
    assert len(shown) == 1 and shown == saved
    assert "budget lock_timeout 100 ms" in saved[0]


async def test_saved_mysql_wait_replays_on_the_same_server_kind(mysql_server, tmp_path):
    """The same on the MySQL family (MariaDB, or MySQL when LOCKRACE_MYSQLD names one):
    the saved race verifies under ``lockrace run`` and prints the saved transcript."""
    async with running_app(engine="mysql", targets={"mysql": mysql_server}, save_dir=tmp_path) as (app, pilot):
        await enter(pilot, app, "A", "BEGIN;")
        await enter(pilot, app, "A", "UPDATE accounts SET balance = balance - 10 WHERE id = 1;")
        await finished(pilot, app, "A", 2)
        await enter(pilot, app, "B", "UPDATE accounts SET balance = balance + 10 WHERE id = 1;")
        await until(pilot, lambda: badge(app, "B").startswith("BLOCKED"), what="B blocked")
        await enter(pilot, app, "A", "COMMIT;")
        await finished(pilot, app, "B", 1)
        await finished(pilot, app, "A", 3)
        await save_through_dialog(app, pilot, tmp_path / "wait.race")
    saved = (tmp_path / "wait.txt").read_text()
    code, printed = await lockrace_run(tmp_path / "wait.race")
    assert code == 0, printed
    assert "-- B is blocked by A on accounts row (PRIMARY 1)" in saved, saved
    assert "B> <... completed step 3>" in saved
    assert TIMES.sub("T", saved) == TIMES.sub("T", printed)
