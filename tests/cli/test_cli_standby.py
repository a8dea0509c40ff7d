"""``lockrace run`` on a PostgreSQL primary + hot standby: lockrace's own pair
(started and removed by the run, also when the run is interrupted), and a
pair given by DSNs (only the sandbox schema is used, and settings are never
changed there)."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import psycopg
import pytest
from support.cli import LiveRun, lockrace_env, processes_mentioning, run_lockrace, server_tmp  # noqa: F401

# also a standby test: pytest -m standby selects it with tests/drivers/standby
pytestmark = pytest.mark.standby


def _postmaster_pids(tmp: Path) -> list[int]:
    return [int(p.read_text().split()[0]) for p in tmp.glob("lockrace-pg-*/data/postmaster.pid")]


def test_run_on_own_pair_leaves_nothing(server_tmp):
    res = run_lockrace(["run", "pg-standby-lock-replayed"], lockrace_env(server_tmp), timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "-- D is blocked by the startup process (replay) on table accounts AccessShareLock" in res.stdout
    assert "Verified against PostgreSQL primary + hot standby 18.6 (primary, standby) (private)" in res.stdout
    assert list(server_tmp.iterdir()) == [], "temp dirs left behind"
    assert processes_mentioning(str(server_tmp)) == []


def test_run_interrupted_while_replay_waits(server_tmp):
    live = LiveRun(["run", "pg-standby-recovery-conflict"], lockrace_env(server_tmp))
    try:
        # replay waits up to 1 s for C while the primary watches it: interrupt then
        assert live.wait_for_line("A> DO $$", 60), live.stdout + live.stderr
        time.sleep(0.2)
        pids = _postmaster_pids(server_tmp)
        assert len(pids) == 2, list(server_tmp.iterdir())
        t0 = time.monotonic()
        live.proc.send_signal(signal.SIGTERM)
        code = live.finish(15)
        took = time.monotonic() - t0
    finally:
        live.kill()
    assert code == 130, (code, live.stdout, live.stderr)
    assert took < 5.0
    assert live.stderr.strip().splitlines() == ["lockrace: interrupted; statements cancelled, servers stopped"]
    assert list(server_tmp.iterdir()) == [], "temp dirs left behind"
    assert processes_mentioning(str(server_tmp)) == []
    assert not [p for p in pids if Path(f"/proc/{p}").exists()], "primary or standby still running"


def _uri(socket_dir: Path) -> str:
    return f"postgresql://postgres@/postgres?host={socket_dir}"


def test_run_on_a_pair_given_by_dsns(pg_standby_pair, tmp_path):
    pair = pg_standby_pair
    dsns = f"{_uri(pair.primary.socket_dir)},{_uri(pair.standby.socket_dir)}"
    env = lockrace_env(tmp_path, LOCKRACE_SANDBOX="stdby_dsn")
    res = run_lockrace(["run", "pg-standby-lock-replayed", "--standby", dsns], env, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "(DSN)" in res.stdout and "blocked by the startup process (replay)" in res.stdout
    with psycopg.connect(pair.primary_conninfo()) as conn:
        assert conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = 'stdby_dsn'").fetchone()[0] == 0

    # a scenario that changes server settings is refused on someone else's servers, before it runs
    with psycopg.connect(pair.standby_conninfo()) as conn:
        before = conn.execute("SELECT setting, source FROM pg_settings WHERE name = 'hot_standby_feedback'").fetchone()
    res = run_lockrace(["run", "pg-standby-hot-standby-feedback", "--standby", dsns], env, timeout=60)
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stderr.strip() == ("lockrace: pg-standby-hot-standby-feedback runs ALTER SYSTEM, which changes the whole"
                                  " server and not only lockrace's sandbox: it runs only on the servers lockrace starts"
                                  " itself, not on a server given by DSN")
    with psycopg.connect(pair.standby_conninfo()) as conn:
        after = conn.execute("SELECT setting, source FROM pg_settings WHERE name = 'hot_standby_feedback'").fetchone()
    assert after == before


def test_run_interrupted_while_the_standby_is_made(server_tmp):
    """SIGTERM while the standby is being made (base backup or start): the
    start finishes in its thread, then both servers are stopped and removed."""
    live = LiveRun(["run", "pg-standby-lock-replayed"], lockrace_env(server_tmp))
    try:
        deadline = time.monotonic() + 30
        while not any(p.name.startswith("lockrace-pg-standby-") for p in server_tmp.iterdir()):
            assert time.monotonic() < deadline, "the standby never began to be made"
            time.sleep(0.005)
        live.proc.send_signal(signal.SIGTERM)
        code = live.finish(30)
    finally:
        live.kill()
    assert code == 130, (code, live.stdout, live.stderr)
    assert "Traceback" not in live.stderr + live.stdout, live.stderr
    assert list(server_tmp.iterdir()) == [], "temp dirs left behind"
    assert processes_mentioning(str(server_tmp)) == []


async def test_replay_gate_without_logical_messages(pg_standby_pair):
    """Before PostgreSQL 17 (or without the right to pg_logical_emit_message) an
    empty synchronous commit flushes the WAL: the lock still reaches the standby."""
    from lockrace.backends.pg_replication import ReplayGate

    pair = pg_standby_pair
    gate = await ReplayGate.connect(pair.primary_conninfo(), pair.standby_conninfo())
    gate.can_emit = False
    primary = await psycopg.AsyncConnection.connect(pair.primary_conninfo(), autocommit=True)
    try:
        await primary.execute("CREATE TABLE IF NOT EXISTS gate_fallback (id int)")
        await primary.execute("BEGIN")
        await primary.execute("LOCK TABLE gate_fallback")
        assert (await gate.sync()).replayed
        async with await psycopg.AsyncConnection.connect(pair.standby_conninfo(), autocommit=True) as standby:
            cur = await standby.execute(
                "SELECT a.backend_type FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
                " WHERE l.relation = (SELECT oid FROM pg_class WHERE relname = 'gate_fallback') AND l.granted")
            assert await cur.fetchall() == [("startup",)]
        await primary.execute("ROLLBACK")
    finally:
        await primary.execute("DROP TABLE IF EXISTS gate_fallback")
        await primary.close()
        await gate.close()


def test_dsns_in_the_wrong_order_are_refused_before_anything_is_created(pg_standby_pair, tmp_path):
    pair = pg_standby_pair
    primary, standby = _uri(pair.primary.socket_dir), _uri(pair.standby.socket_dir)
    env = lockrace_env(tmp_path, LOCKRACE_SANDBOX="stdby_order")
    for dsns, says in ((f"{standby},{primary}", "the first DSN must be the primary"),
                       (f"{primary},{primary}", "the second DSN must be a hot standby")):
        res = run_lockrace(["run", "pg-standby-lock-replayed", "--standby", dsns], env, timeout=60)
        assert res.returncode == 2, res.stdout + res.stderr
        assert len(res.stderr.strip().splitlines()) == 1 and says in res.stderr, res.stderr
        assert "Traceback" not in res.stderr
    with psycopg.connect(pair.primary_conninfo()) as conn:
        assert conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = 'stdby_order'").fetchone()[0] == 0


def test_app_in_a_terminal_on_the_standby_pair_exits_on_sigterm(server_tmp):
    """`lockrace --engine postgres-standby` in a pty, with nothing but the pip
    install: panels name primary and standby; SIGTERM ends the app promptly,
    gives the terminal back, and both servers and their temp dirs are gone."""
    from support.terminal import Terminal

    term = Terminal(["--engine", "postgres-standby"], lockrace_env(server_tmp, TERM="xterm-256color"))
    try:
        assert term.read_until(b"Session C @ standby", 60), term.screen[-2000:]
        assert term.read_until(b"engine: postgres-standby", 30), term.screen[-2000:]
        assert sorted(p.name.rsplit("-", 1)[0] for p in server_tmp.iterdir()) == [
            "lockrace-pg-primary", "lockrace-pg-standby"]
        code, took = term.signal_and_wait(signal.SIGTERM)
    finally:
        term.close()
    term.assert_ended_cleanly(code, took, 10)
    assert processes_mentioning(str(server_tmp)) == []
    assert list(server_tmp.iterdir()) == []


_RACE = """\
title: one row
engines: postgres
setup:
    CREATE TABLE t (id int PRIMARY KEY);
teardown:
    DROP TABLE IF EXISTS t;

A> SELECT 1;
    expect: ok
"""

_SPEC = """\
setup { CREATE TABLE t (id int PRIMARY KEY); }
teardown { DROP TABLE t; }
session s1
step s1a { SELECT 1; }
permutation s1a
"""


def test_a_hot_standby_given_with_pg_is_refused(pg_standby_pair, tmp_path):
    """``--pg`` names a hot standby: a plain PostgreSQL run needs a primary to
    create its sandbox on.  ``lockrace run`` (a .race, an isolation .spec),
    ``lockrace bench`` and the app each refuse it with one sentence and exit 2
    (unusable input) before creating anything; a .race used to end in 'setup
    failed' (1), a .spec, a bench and the app in a traceback or a banner."""
    from support.terminal import Terminal

    pair = pg_standby_pair
    dsn = _uri(pair.standby.socket_dir)
    sentence = (f"lockrace: {dsn} is a hot standby (pg_is_in_recovery() is true), read-only: lockrace needs a"
                " primary to create its sandbox on; give the primary's DSN, or both to --engine postgres-standby"
                " with --standby PRIMARY_URI,STANDBY_URI")
    (tmp_path / "one.race").write_text(_RACE)
    (tmp_path / "one.spec").write_text(_SPEC)
    env = lockrace_env(tmp_path, LOCKRACE_SANDBOX="stdby_refused")
    for args in (["run", str(tmp_path / "one.race")], ["run", str(tmp_path / "one.spec")],
                 ["bench", "--engine", "postgres", "--runs", "1"]):
        res = run_lockrace([*args, "--pg", dsn], env, timeout=60)
        assert (res.returncode, res.stderr.strip()) == (2, sentence), (args, res.stdout + res.stderr)
        assert "Traceback" not in res.stdout + res.stderr
    # the app, in a terminal as a user starts it: the same sentence, before it opens
    term = Terminal(["--pg", dsn], lockrace_env(tmp_path, TERM="xterm-256color", LOCKRACE_SANDBOX="stdby_refused"))
    try:
        deadline = time.monotonic() + 30
        while term.proc.poll() is None and time.monotonic() < deadline:
            term.read_until(b"\x00never", 0.05)
        code = term.proc.poll()
        term.settle(0.2)
    finally:
        term.close()
    assert code == 2, term.text[-2000:]
    assert sentence in term.text.replace("\r\n", "\n").replace("\n", " "), term.text[-2000:]
    assert "Traceback" not in term.text
    with psycopg.connect(pair.primary_conninfo()) as conn:  # nothing was made on its primary either
        assert conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'stdby_refused%'").fetchone()[0] == 0

    # the same standby as the standby of a pair still works (its primary first)
    res = run_lockrace(["run", "pg-standby-lock-replayed", "--standby", f"{_uri(pair.primary.socket_dir)},{dsn}"],
                       lockrace_env(tmp_path, LOCKRACE_SANDBOX="stdby_pair"), timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
