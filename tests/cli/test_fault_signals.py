"""Fault matrix 3 (CLI part): ``lockrace run`` interrupted by SIGINT / SIGTERM /
SIGQUIT while three sessions are blocked and a fourth statement sleeps.

The process must exit promptly (130, one line on stderr, no traceback); its
private server must be gone with its temp dir (each run gets its own TMPDIR,
so the check cannot see other runs' servers) and no process of it may be
left.  On a server lockrace did not start (DSN), no connection of the run may
remain and lockrace's sandbox schema/database must be dropped.
"""

from __future__ import annotations

import os
import signal
import time
import uuid

import pytest
from support.cli import SLEEP, LiveRun, blocking_scenario, lockrace_env, processes_mentioning, server_tmp  # noqa: F401
from support.dsn import mysql_dsn, pg_dsn  # noqa: F401  (fixtures)
from support.server_view import private_server_connect, sleeping
from support.waits import eventually


def _interrupt(live: LiveRun, engine: str, sig: int, connect) -> tuple[int, float]:
    """Signal ``live`` once B, C and D wait and the server (``connect`` opens a connection
    to it) reports A's sleep running."""
    try:
        assert live.wait_for_line(f"A> {SLEEP[engine]}", 30), live.stdout + live.stderr
        assert live.stdout.count(" is blocked by ") == 3, live.stdout
        eventually(lambda: sleeping(engine, connect), timeout=10, what="A's sleep to run on the server")
        t0 = time.monotonic()
        live.proc.send_signal(sig)
        code = live.finish(15)
        return code, time.monotonic() - t0
    finally:
        live.kill()


def _check_clean_exit(live: LiveRun, code: int, took: float) -> None:
    assert code == 130, (code, live.stdout, live.stderr)
    assert took < 5.0, f"took {took:.1f} s to exit"
    assert "Traceback" not in live.stderr + live.stdout, live.stderr
    assert live.stderr.strip().splitlines() == ["lockrace: interrupted; statements cancelled, servers stopped"]


# Each signal on each engine, and each engine with each kind of server, in six runs.
# SIGQUIT (Ctrl-\\) is a way to stop like the others: it once killed lockrace at once.
@pytest.mark.parametrize("engine,sig", [("postgres", signal.SIGINT), ("mysql", signal.SIGTERM),
                                        ("postgres", signal.SIGQUIT)],
                         ids=["postgres-SIGINT", "mysql-SIGTERM", "postgres-SIGQUIT"])
def test_run_interrupted_on_private_server(engine, sig, tmp_path, server_tmp):
    scenario = tmp_path / "blocks.race"
    scenario.write_text(blocking_scenario(engine))
    tmp = server_tmp
    live = LiveRun(["run", str(scenario), "--step-timeout", "120"], lockrace_env(tmp))
    code, took = _interrupt(live, engine, sig, private_server_connect(engine, tmp))
    _check_clean_exit(live, code, took)
    assert sorted(p.name for p in tmp.iterdir()) == [], "private server temp dirs left behind"
    assert processes_mentioning(str(tmp)) == [], "server processes left behind"


def _pg_leftovers(pg_dsn, dbname: str, sandbox: str) -> tuple[list, bool]:
    with pg_dsn.connect(dbname) as conn:
        backends = conn.execute(
            "SELECT pid, application_name, state FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            [dbname]).fetchall()
        schema = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s", [sandbox]).fetchone()[0]
    return backends, bool(schema)


def _mysql_leftovers(mysql_dsn, sandbox: str) -> tuple[list, bool]:
    conn = mysql_dsn.connect()
    try:
        cur = conn.cursor()
        cur.execute("SELECT ID, COMMAND, INFO FROM information_schema.PROCESSLIST WHERE DB = %s", (sandbox,))
        backends = list(cur.fetchall())
        cur.execute("SELECT count(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s", (sandbox,))
        return backends, bool(cur.fetchone()[0])
    finally:
        conn.close()


@pytest.mark.parametrize("engine,sig", [("postgres", signal.SIGTERM), ("mysql", signal.SIGINT),
                                        ("mysql", signal.SIGQUIT)],
                         ids=["postgres-SIGTERM", "mysql-SIGINT", "mysql-SIGQUIT"])
def test_run_interrupted_on_dsn_server(engine, sig, tmp_path, pg_dsn, mysql_dsn):
    token = uuid.uuid4().hex[:8]
    sandbox = f"lockrace_sig_{token}"
    scenario = tmp_path / "blocks.race"
    scenario.write_text(blocking_scenario(engine))
    dbname = f"fault_sig_{token}"
    if engine == "postgres":
        # a database of its own, so that its backends are the run's and nobody else's
        with pg_dsn.connect() as conn:
            conn.execute(f"CREATE DATABASE {dbname}")
        flags = ["--pg", pg_dsn.dsn(dbname)]
    else:
        flags = ["--mysql", mysql_dsn.dsn()]
    try:
        live = LiveRun(["run", str(scenario), "--step-timeout", "120", *flags],
                       lockrace_env(tmp_path, LOCKRACE_SANDBOX=sandbox))
        code, took = _interrupt(live, engine, sig, pg_dsn.connect if engine == "postgres" else mysql_dsn.connect)
        _check_clean_exit(live, code, took)
        deadline = time.monotonic() + 5
        while True:
            if engine == "postgres":
                left, schema = _pg_leftovers(pg_dsn, dbname, sandbox)
            else:
                left, schema = _mysql_leftovers(mysql_dsn, sandbox)
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert left == [], "connections of the interrupted run are still on the server"
        assert not schema, f"sandbox {sandbox} was not dropped"
    finally:
        if engine == "postgres":
            with pg_dsn.connect() as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {dbname} WITH (FORCE)")
        else:
            conn = mysql_dsn.connect()
            try:
                conn.cursor().execute(f"DROP DATABASE IF EXISTS `{sandbox}`")
            finally:
                conn.close()


@pytest.mark.parametrize("engine", ["postgres", "mysql"])
def test_run_survives_its_server_dying(engine, tmp_path, server_tmp):
    """``lockrace run``'s own private server is killed (SIGKILL, whole process group)
    while three sessions wait: the run reports the lost connections, fails the
    steps (exit 1), prints no traceback, and still removes the server's temp dir."""
    scenario = tmp_path / "blocks.race"
    scenario.write_text(blocking_scenario(engine).replace("60", "20"))
    live = LiveRun(["run", str(scenario), "--step-timeout", "30"], lockrace_env(server_tmp))
    try:
        assert live.wait_for_line(f"A> {SLEEP[engine].replace('60', '20')}", 30), live.stdout + live.stderr
        servers = [line.split(":", 1)[0] for line in processes_mentioning(str(server_tmp))
                   if ("postgres -D" in line or "mariadbd" in line or "mysqld" in line)]
        assert servers, processes_mentioning(str(server_tmp))
        os.killpg(os.getpgid(int(servers[0])), signal.SIGKILL)
        t0 = time.monotonic()
        code = live.finish(30)
        took = time.monotonic() - t0
    finally:
        live.kill()
    text = live.stdout + live.stderr
    assert code == 1, text
    assert "Traceback" not in text, text
    assert "connection lost" in live.stdout, live.stdout
    # a lost connection is a failure by itself, whatever else the steps expected (and
    # whichever order the sessions found out in): never "Verified"
    assert "Verified" not in live.stdout
    assert "lost its connection to the server" in live.stdout, live.stdout
    assert took < 10, f"took {took:.1f} s after the server died"
    assert sorted(p.name for p in server_tmp.iterdir()) == [], "private server temp dir left behind"
    assert processes_mentioning(str(server_tmp)) == []


@pytest.mark.parametrize("cache", ["warm", "cold"])
@pytest.mark.parametrize("engine", ["postgres", "mysql"])
def test_run_interrupted_while_its_server_starts(engine, cache, server_tmp, tmp_path):
    """Ctrl-C while the private server is still starting: copying its data
    directory, or (cold: a first run, no template in the cache yet) initialising
    one.  The copy or initdb is killed, and nothing is left: no temp dir, no
    process, no half-made template in the cache."""
    extra = {"XDG_CACHE_HOME": str(tmp_path / "cache")} if cache == "cold" else {}
    live = LiveRun(["run", "pg-nowait" if engine == "postgres" else "mysql-nowait"], lockrace_env(server_tmp, **extra))
    try:
        deadline = time.monotonic() + 15
        while not any(p.name.startswith("lockrace-") for p in server_tmp.iterdir()):
            assert time.monotonic() < deadline, "the private server never began to start"
            time.sleep(0.01)
        t0 = time.monotonic()
        live.proc.send_signal(signal.SIGINT)
        code = live.finish(30)
        took = time.monotonic() - t0
    finally:
        live.kill()
    _check_clean_exit(live, code, took)
    assert sorted(p.name for p in server_tmp.iterdir()) == [], "private server temp dir left behind"
    assert processes_mentioning(str(server_tmp)) == []
    if cache == "cold":
        made = sorted(p.name for p in (tmp_path / "cache" / "lockrace").iterdir())
        assert not [name for name in made if not name.endswith(".lock")] or any(
            name.endswith("-template") for name in made), made  # a template is whole or absent
        assert not [name for name in made if name.endswith(".partial")], made
