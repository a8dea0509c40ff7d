"""Fault matrix, app side (Textual Pilot on real servers).

1. bad SQL in a panel: the error with its code; PostgreSQL's "failed
   transaction" until ROLLBACK;
2. the server dies mid-race: every panel shows the lost connection, the app
   stays up, Reset (F4) reconnects once the server is back;
3. quitting while three sessions are blocked: no connection of lockrace's is
   left on the server, the transactions were rolled back, and a server the app
   started is stopped with its temp dir;
4. a statement that never finishes is cancelled with F2.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
from pathlib import Path

import pytest
from support.app import badge, enter, finished, until
from support.terminal import Terminal
from support.cli import blocking_scenario, lockrace_env, processes_mentioning, server_tmp  # noqa: F401 (fixture)
from support.dsn import pg_dsn  # noqa: F401 (fixture)
from support.server_view import mysql_connect, pg_connect, wait_until_gone

from lockrace.app.app import LockraceApp

SIZE = (160, 48)


def panel_text(app, session: str) -> str:
    return "\n".join(app.panels[session].lines)


async def start(app: LockraceApp, pilot) -> None:
    await asyncio.wait_for(app.ready.wait(), 30)
    await pilot.pause()


async def quit_app(app: LockraceApp, pilot, timeout: float = 20) -> None:
    await pilot.press("ctrl+q")
    for _ in range(int(timeout / 0.05)):
        if app.return_code is not None or not app.is_running:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the app did not exit after Ctrl+Q")


# ------------------------------------------------------------------ 1. bad SQL


async def test_bad_sql_in_a_panel_pg(pg_server):
    app = LockraceApp(engine="postgres", targets={"postgres": pg_server})
    async with app.run_test(size=SIZE) as pilot:
        await start(app, pilot)
        await enter(pilot, app, "A", "BEGIN;")
        await finished(pilot, app, "A", 1)
        await enter(pilot, app, "A", "SELEC 1;")
        await finished(pilot, app, "A", 2)
        assert 'ERROR: 42601: syntax error at or near "SELEC"' in panel_text(app, "A")
        assert badge(app, "A") == "error"
        assert app.panels["A"].status.transaction().label == "failed transaction (ROLLBACK needed)"
        await enter(pilot, app, "A", "SELECT 1;")
        await finished(pilot, app, "A", 3)
        assert "ERROR: 25P02: current transaction is aborted" in panel_text(app, "A")
        assert app.panels["A"].status.transaction().label == "failed transaction (ROLLBACK needed)"
        await enter(pilot, app, "A", "ROLLBACK;")
        await finished(pilot, app, "A", 4)
        assert app.panels["A"].status.transaction().label == "idle"
        await enter(pilot, app, "A", "SELECT 40 + 2 AS answer;")
        await finished(pilot, app, "A", 5)
        assert app.panels["A"].status.last.rows == [("42",)]
        await quit_app(app, pilot)


async def test_bad_sql_in_a_panel_mariadb(mysql_server):
    app = LockraceApp(engine="mysql", targets={"mysql": mysql_server})
    async with app.run_test(size=SIZE) as pilot:
        await start(app, pilot)
        await enter(pilot, app, "B", "SELEC 1;")
        await finished(pilot, app, "B", 1)
        assert "ERROR 1064 (42000): You have an error in your SQL syntax" in panel_text(app, "B")
        await enter(pilot, app, "B", "SELECT 6 * 7;")
        await finished(pilot, app, "B", 2)
        assert app.panels["B"].status.last.rows == [("42",)]
        await quit_app(app, pilot)


# ------------------------------------------------------------------ 2. server dies


async def test_server_dies_every_panel_shows_it_and_reset_reconnects(own_server):
    engine = own_server.family
    app = LockraceApp(engine=engine, targets={engine: own_server})
    async with app.run_test(size=SIZE) as pilot:
        await start(app, pilot)
        await enter(pilot, app, "A", "BEGIN;")
        await enter(pilot, app, "A", "UPDATE accounts SET balance = 1 WHERE id = 1;")
        await finished(pilot, app, "A", 2)
        await enter(pilot, app, "B", "UPDATE accounts SET balance = 2 WHERE id = 1;")
        await until(pilot, lambda: badge(app, "B").startswith("BLOCKED by A"), what="B blocked by A")

        await asyncio.to_thread(own_server.server.kill)
        await until(pilot, lambda: all(p.status.transaction().label == "connection lost" for p in app.panels.values()),
                    timeout=15, what="every panel to show the lost connection")
        assert badge(app, "B") == "connection lost"
        assert app.is_running

        await asyncio.to_thread(own_server.server.restart)
        await pilot.press("f4")  # Reset: fresh sessions on the server that is back
        await until(pilot, lambda: app.race is not None and app.ready.is_set()
                    and all(p.status.transaction().label == "idle" for p in app.panels.values()),
                    timeout=20, what="sessions back after Reset")
        await enter(pilot, app, "C", "SELECT balance FROM accounts WHERE id = 1;")
        await finished(pilot, app, "C", 1)
        assert app.panels["C"].status.last.outcome == "ok"
        await quit_app(app, pilot)


async def test_reset_restarts_a_private_server_that_died(own_server):
    """F4 after lockrace's own server died brings the server back itself."""
    engine = own_server.family
    app = LockraceApp(engine=engine, targets={engine: own_server})
    async with app.run_test(size=SIZE) as pilot:
        await start(app, pilot)
        await enter(pilot, app, "A", "SELECT 1;")
        await finished(pilot, app, "A", 1)
        await asyncio.to_thread(own_server.server.kill)
        assert not own_server.server.running
        await enter(pilot, app, "A", "SELECT 2;")
        await until(pilot, lambda: badge(app, "A") == "connection lost", timeout=15, what="A's lost connection")
        await pilot.press("f4")  # nobody restarted the server: Reset does
        await until(pilot, lambda: app.race is not None and app.ready.is_set()
                    and all(p.status.transaction().label == "idle" for p in app.panels.values()),
                    timeout=30, what="sessions back after Reset")
        assert own_server.server.running
        await enter(pilot, app, "B", "SELECT balance FROM accounts WHERE id = 1;")
        await finished(pilot, app, "B", 1)
        assert app.panels["B"].status.last.outcome == "ok"
        await quit_app(app, pilot)


# ------------------------------------------------------------------ 3. quit while blocked


def _balance(target, sandbox) -> list:
    if target.family == "postgres":
        with pg_connect(target) as conn:
            return conn.execute(f"SELECT balance FROM {sandbox}.accounts WHERE id = 1").fetchall()
    conn = mysql_connect(target)
    try:
        cur = conn.cursor()
        cur.execute(f"SELECT balance FROM `{sandbox}`.accounts WHERE id = 1")
        return [tuple(r) for r in cur.fetchall()]
    finally:
        conn.close()


async def test_quit_while_three_sessions_are_blocked(own_server):
    engine = own_server.family
    app = LockraceApp(engine=engine, targets={engine: own_server})
    async with app.run_test(size=SIZE) as pilot:
        await start(app, pilot)
        before = await asyncio.to_thread(_balance, own_server, own_server.sandbox)
        await enter(pilot, app, "A", "BEGIN;")
        await enter(pilot, app, "A", "UPDATE accounts SET balance = balance + 1000 WHERE id = 1;")
        await finished(pilot, app, "A", 2)
        for name in ("B", "C", "D"):
            await enter(pilot, app, name, "UPDATE accounts SET balance = balance + 1 WHERE id = 1;")
        await until(pilot, lambda: all(badge(app, n).startswith("BLOCKED") for n in "BCD"), what="B, C, D blocked")
        idents = [p.status.ident for p in app.panels.values()]
        await quit_app(app, pilot)
    # the app did not start this server, so it is still up: nothing of lockrace's is left on it
    assert await asyncio.to_thread(wait_until_gone, own_server, idents) == []
    assert await asyncio.to_thread(_balance, own_server, own_server.sandbox) == before


@pytest.mark.parametrize("engine", ["postgres", "mysql"])
async def test_quit_stops_the_server_the_app_started(engine):
    app = LockraceApp(engine=engine)
    async with app.run_test(size=SIZE) as pilot:
        await start(app, pilot)
        target = app.pool.targets[engine]
        assert target.owned
        server_dir = Path(target.server.dir)
        proc = target.server.proc
        assert server_dir.is_dir() and proc.poll() is None
        await enter(pilot, app, "A", "BEGIN;")
        await enter(pilot, app, "A", "UPDATE accounts SET balance = 1 WHERE id = 1;")
        await finished(pilot, app, "A", 2)
        await enter(pilot, app, "B", "UPDATE accounts SET balance = 2 WHERE id = 1;")
        await until(pilot, lambda: badge(app, "B").startswith("BLOCKED"), what="B blocked")
        await quit_app(app, pilot, timeout=30)
    assert proc.poll() is not None, "the private server is still running"
    assert not server_dir.exists(), f"{server_dir} was left behind"


# ------------------------------------------------------------------ 4. cancel from the UI


@pytest.mark.parametrize("key", ["f2", "ctrl+c"])
@pytest.mark.parametrize("engine,sql", [("postgres", "SELECT pg_sleep(60);"), ("mysql", "SELECT 1 FROM DUAL WHERE SLEEP(60) = 0;")])
async def test_f2_cancels_a_statement_that_never_finishes(engine, sql, key, pg_server, mysql_server):
    """F2, or Ctrl+C as in psql, cancels the focused session's statement on the server."""
    target = pg_server if engine == "postgres" else mysql_server
    app = LockraceApp(engine=engine, targets={engine: target})
    async with app.run_test(size=SIZE) as pilot:
        await start(app, pilot)
        await enter(pilot, app, "D", sql)
        await until(pilot, lambda: badge(app, "D") == "running", what="D running")
        await pilot.press(key)  # D's panel has focus
        await finished(pilot, app, "D", 1, timeout=5)
        assert badge(app, "D") == "cancelled"
        assert app.panels["D"].status.last.code == ("57014" if engine == "postgres" else "1317")
        await quit_app(app, pilot)


async def test_ctrl_c_with_nothing_running_hints_at_ctrl_q_and_keeps_the_app(pg_server):
    """Ctrl+C in an idle session cancels nothing and does not quit: Textual's hint says
    Ctrl+Q quits (the app is still there, the session still idle)."""
    app = LockraceApp(engine="postgres", targets={"postgres": pg_server})
    async with app.run_test(size=SIZE) as pilot:
        await start(app, pilot)
        await enter(pilot, app, "A", "SELECT 1;")
        await finished(pilot, app, "A", 1)
        before = len(app._notifications)
        await pilot.press("ctrl+c")
        await until(pilot, lambda: len(app._notifications) > before, what="a notification")
        said = " ".join(str(n.message) for n in list(app._notifications)[before:])
        assert "ctrl+q" in said.lower() and "not running" not in said, said
        assert app.is_running and not app.race.sessions["A"].busy
        assert app.panels["A"].status.last.outcome == "ok"  # nothing was cancelled
        await quit_app(app, pilot)


# ------------------------------------------------------------------ the real terminal


@pytest.mark.parametrize("engine,sig", [("postgres", signal.SIGTERM), ("mysql", signal.SIGINT),
                                        ("mysql", signal.SIGQUIT)],
                         ids=["postgres-SIGTERM", "mysql-SIGINT", "mysql-SIGQUIT"])
def test_app_in_a_terminal_interrupted_while_three_sessions_wait(engine, sig, tmp_path, server_tmp):
    """The real app in a pty runs a scenario (F6) until B, C, D wait and A sleeps,
    then gets SIGTERM / SIGINT / SIGQUIT: it exits promptly without a traceback, gives the
    terminal back (leaves the alternate screen), and its private server is gone
    with its temp dir."""
    scenario = tmp_path / "blocks.race"
    scenario.write_text(blocking_scenario(engine))
    term = Terminal(["--engine", engine, "--scenario", str(scenario)],
                    lockrace_env(server_tmp, TERM="xterm-256color"))
    try:
        assert term.read_until(b"F5 step", 30), term.screen[-2000:]
        os.write(term.master, b"\x1b[17~")  # F6: run to the end
        assert term.read_until(b"waits on", 20), term.screen[-2000:]
        term.read_until(b"\x00never", 1.0)  # let the last steps land
        assert [p.name for p in server_tmp.iterdir() if p.name.startswith("lockrace-")], "no private server?"
        code, took = term.signal_and_wait(sig, 20)
    finally:
        term.close()
    term.assert_ended_cleanly(code, took, 5)
    assert sorted(p.name for p in server_tmp.iterdir()) == [], "private server temp dir left behind"
    assert processes_mentioning(str(server_tmp)) == []


@pytest.mark.parametrize("foreign_lock,sig", [(False, signal.SIGINT), (True, signal.SIGINT), (False, signal.SIGQUIT)],
                         ids=["plain", "behind-a-foreign-lock", "plain-SIGQUIT"])
def test_app_on_a_dsn_server_interrupted_drops_its_sandbox(pg_dsn, tmp_path, foreign_lock, sig):
    """The real app in a pty on a server given by DSN gets SIGINT (Ctrl-C from a
    shell) or SIGQUIT: like ``lockrace run``, it drops its sandbox schema on the
    way out (it was left behind).  Where another client holds a lock in the sandbox, it says on
    stderr that the schema stays for a later run, still within moments."""
    import uuid

    sandbox = f"lockrace_appsig_{uuid.uuid4().hex[:8]}"
    term = Terminal(["--pg", pg_dsn.dsn()], lockrace_env(tmp_path, TERM="xterm-256color", LOCKRACE_SANDBOX=sandbox))
    foreign = None
    try:
        assert term.read_until(b"-- PostgreSQL", 60), term.screen[-2000:]
        term.settle(0.3)
        if foreign_lock:
            foreign = pg_dsn.connect()
            foreign.execute("BEGIN")
            foreign.execute(f'LOCK TABLE "{sandbox}".accounts IN ACCESS EXCLUSIVE MODE')
        code, took = term.signal_and_wait(sig, 20)
    finally:
        term.close()
        if foreign is not None:
            foreign.execute("ROLLBACK")
            foreign.close()
    term.assert_ended_cleanly(code, took, 5)
    with pg_dsn.connect() as admin:
        left = admin.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s", [sandbox]).fetchone()[0]
        admin.execute(f'DROP SCHEMA IF EXISTS "{sandbox}" CASCADE')
    if foreign_lock:
        assert left == 1
        assert f"sandbox schema {sandbox}" in term.text or "next run removes it" in term.text, term.text[-2000:]
    else:
        assert left == 0, f"sandbox {sandbox} was left behind"


@pytest.mark.parametrize("burst", [False, True], ids=["typed", "one-burst"])
@pytest.mark.parametrize("letter", ["c", "b"])
def test_alt_letter_in_a_real_terminal_switches_panels(tmp_path, server_tmp, letter, burst):
    """A terminal sends Alt+C as ESC c (Textual: key "alt+c" with the character "c"):
    the focused panel's input must not type the "c", and the app's Alt+C must move
    to session C (it typed "cSELECT ..." into A before).  Alt+B is ESC b, which
    Textual reads as Ctrl+Left (iTerm's word-left): it moved A's cursor instead.
    In one burst (Alt+C and the SQL in one write: a fast typist, a paste, tmux
    send-keys) the SQL must land in C too: it landed in A while the focus moved
    only on a later turn."""
    upper = letter.upper().encode()
    term = Terminal([], lockrace_env(server_tmp, TERM="xterm-256color"))
    try:
        # connected: each panel's transcript starts with the server's name (before that the
        # panels already show their inputs, but a statement would be refused: "Not connected yet")
        assert term.read_until(b"-- PostgreSQL", 60), term.screen[-2000:]
        term.settle(0.5)
        if burst:
            os.write(term.master, b"\x1b" + letter.encode() + b"SELECT 'alt'\r")
        else:
            os.write(term.master, b"\x1b" + letter.encode())  # Alt+<letter>, as the terminal sends it
            term.settle(0.3)
            os.write(term.master, b"SELECT 'alt'\r")
        shown = re.sub(r"\x1b\[[0-9;?<>=]*[A-Za-z]", " ", term.text) \
            if not term.read_until(upper + b"> SELECT 'alt'", 10) else ""
        assert not shown, " ".join(shown.split())[-1500:]
        assert letter.encode() + b"SELECT 'alt'" not in term.screen
        code, took = term.signal_and_wait(signal.SIGTERM, 20)
    finally:
        term.close()
    term.assert_ended_cleanly(code, took, 5)


# ------------------------------------------------------------------ 5. quit behind a foreign lock


async def test_quit_behind_a_foreign_lock_says_the_sandbox_stays(pg_dsn):
    """Ctrl+Q while another client holds a lock in lockrace's sandbox on a DSN server: the
    app ends within the documented bound and says, once the screen is gone, that the
    sandbox was left for a later run (it used to end without a word)."""
    app = LockraceApp(engine="postgres", pg=pg_dsn.dsn())
    async with app.run_test(size=SIZE) as pilot:
        await start(app, pilot)
        sandbox = app.pool.targets["postgres"].sandbox
        foreign = pg_dsn.connect()
        try:
            foreign.execute("BEGIN")
            foreign.execute(f'LOCK TABLE "{sandbox}".accounts IN ACCESS EXCLUSIVE MODE')
            t0 = time.monotonic()
            await quit_app(app, pilot, timeout=30)
            took = time.monotonic() - t0
        finally:
            foreign.execute("ROLLBACK")
            foreign.close()
    assert took < 12, took
    assert any(sandbox in text and "left in place" in text for text in app.farewell), app.farewell
    with pg_dsn.connect() as admin:  # the next start removes it; here the test does
        admin.execute(f'DROP SCHEMA IF EXISTS "{sandbox}" CASCADE')


def test_app_whose_terminal_goes_away_without_a_sighup_ends_and_stops_its_server(server_tmp):
    """The app in a pty that is not its controlling terminal (as under setsid or a program
    driving it): when the terminal's other end closes no SIGHUP comes, and Textual's
    input thread read the hang-up as nothing, at full speed, for ever (an orphan at 100 %
    of a core holding its private server).  It now ends as on SIGHUP: exit 130 within
    moments, its private server stopped and its temp dir gone."""
    import time

    term = Terminal([], lockrace_env(server_tmp, TERM="xterm-256color"))
    try:
        assert term.read_until(b"-- PostgreSQL", 60), term.screen[-2000:]
        assert [p.name for p in server_tmp.iterdir() if p.name.startswith("lockrace-")], "no private server?"
        os.close(term.master)  # the terminal window closes
        t0 = time.monotonic()
        while term.proc.poll() is None and time.monotonic() - t0 < 20:
            time.sleep(0.05)
        took = time.monotonic() - t0
        code = term.proc.poll()
    finally:
        if term.proc.poll() is None:
            term.proc.kill()
            term.proc.wait(5)
    assert code == 130, f"still running {took:.1f} s after its terminal closed" if code is None else code
    assert took < 10
    assert sorted(p.name for p in server_tmp.iterdir()) == [], "private server temp dir left behind"
    assert processes_mentioning(str(server_tmp)) == []
