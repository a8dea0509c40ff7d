"""Fault matrix 7b: lockrace on servers shared with other clients and other
lockrace processes.

- A schema/database the user made, even one named like lockrace's sandbox,
  is never dropped, altered or written: lockrace refuses it in one sentence.
- Two ``lockrace run`` processes on one DSN server each work in a sandbox of
  their own and both stay green.
- ``kill -9`` of lockrace leaves no lockrace backend or server process behind
  after a few seconds, and the next run starts clean.
- Teardown DROP behind another client's lock gives up within its bound with a
  clear sentence, and leaves the sandbox (and the other client) alone.

DSN servers: 127.0.0.1:5432 / 127.0.0.1:3306 where they answer, the tests'
private servers by socket otherwise (tests/support/dsn.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from support.scenarios import accounts_setup
from support.server_view import private_server_connect, sleeping
from support.waits import eventually
from support.cli import (SLEEP, LiveRun, blocking_scenario, lockrace_env, processes_mentioning,  # noqa: F401
                        run_lockrace, server_tmp)
from support.dsn import mysql_dsn, pg_dsn  # noqa: F401  (fixtures)

from lockrace.backends.sandbox import DDL_LOCK_WAIT_S
from lockrace.scenario.library import builtins

# ------------------------------------------------------------------ helpers


@pytest.fixture
def pg_db(pg_dsn):
    """A PostgreSQL database of the test's own on the DSN server."""
    name = f"fault_own_{uuid.uuid4().hex[:8]}"
    with pg_dsn.connect() as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield name
    finally:
        with pg_dsn.connect() as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _pg_schemas(pg_dsn, db: str) -> list[str]:
    with pg_dsn.connect(db) as conn:
        return [r[0] for r in conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'lockrace%' ORDER BY 1").fetchall()]


def _pg_lockrace_backends(pg_dsn, db: str) -> list[tuple]:
    with pg_dsn.connect() as conn:
        return conn.execute(
            "SELECT pid, application_name, state, wait_event_type, query FROM pg_stat_activity"
            " WHERE datname = %s AND application_name LIKE 'lockrace%%'", [db]).fetchall()


def _mysql_query(mysql_dsn, sql: str, args=()) -> list[tuple]:
    conn = mysql_dsn.connect()
    try:
        cur = conn.cursor()
        cur.execute(sql, args)
        return list(cur.fetchall()) if cur.description else []
    finally:
        conn.close()


def _one_sentence(out: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in out.stdout + out.stderr, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    return lines[0]


# ------------------------------------------------------------------ finding 1: planted objects survive


def test_pg_planted_schema_named_lockrace_survives(pg_dsn, pg_db):
    """The user's own schema ``lockrace`` with a table: lockrace works beside it, and
    refuses it when LOCKRACE_SANDBOX names it."""
    with pg_dsn.connect(pg_db) as conn:
        conn.execute("CREATE SCHEMA lockrace")
        conn.execute("CREATE TABLE lockrace.accounts (id int PRIMARY KEY, note text)")
        conn.execute("INSERT INTO lockrace.accounts VALUES (1, 'mine'), (2, 'keep me')")
    out = run_lockrace(["run", "pg-nowait", "--pg", pg_dsn.dsn(pg_db)], lockrace_env(), 60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Verified against PostgreSQL" in out.stdout

    out = run_lockrace(["run", "pg-nowait", "--pg", pg_dsn.dsn(pg_db)], lockrace_env(LOCKRACE_SANDBOX="lockrace"), 60)
    assert out.returncode == 2, out.stdout + out.stderr
    line = _one_sentence(out)
    assert "schema lockrace already exists and is not a lockrace sandbox" in line, line

    with pg_dsn.connect(pg_db) as conn:
        assert conn.execute("SELECT * FROM lockrace.accounts ORDER BY 1").fetchall() == [(1, "mine"), (2, "keep me")]
        assert conn.execute("SELECT obj_description('lockrace'::regnamespace, 'pg_namespace')").fetchone()[0] is None
    assert _pg_schemas(pg_dsn, pg_db) == ["lockrace"]  # and the run's own sandbox is gone


def test_mysql_planted_database_survives(mysql_dsn):
    """LOCKRACE_SANDBOX names the user's existing database: refused, untouched."""
    db = f"fault_mine_{uuid.uuid4().hex[:8]}"
    _mysql_query(mysql_dsn, f"CREATE DATABASE `{db}`")
    try:
        _mysql_query(mysql_dsn, f"CREATE TABLE `{db}`.accounts (id int PRIMARY KEY, note varchar(20)) ENGINE=InnoDB")
        _mysql_query(mysql_dsn, f"INSERT INTO `{db}`.accounts VALUES (1, 'mine'), (2, 'keep me')")
        out = run_lockrace(["run", "mysql-nowait", "--mysql", mysql_dsn.dsn()], lockrace_env(LOCKRACE_SANDBOX=db), 60)
        assert out.returncode == 2, out.stdout + out.stderr
        line = _one_sentence(out)
        assert f"database {db} already exists and is not a lockrace sandbox" in line, line
        assert _mysql_query(mysql_dsn, f"SELECT id, note FROM `{db}`.accounts ORDER BY 1") == [(1, "mine"), (2, "keep me")]
        assert _mysql_query(mysql_dsn, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s",
                            (db,)) == [("accounts",)]
    finally:
        _mysql_query(mysql_dsn, f"DROP DATABASE IF EXISTS `{db}`")


# ------------------------------------------------------------------ finding 2: two processes at once


def _loop(argv: list[str], env: dict, seconds: float) -> list[tuple[int, subprocess.CompletedProcess]]:
    """Run ``lockrace`` again and again for ``seconds``; (pid-less) results of each run."""
    results = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        results.append(run_lockrace(argv, env, 120))
    return results


def test_two_processes_loop_on_one_dsn_server(pg_dsn, pg_db, mysql_dsn):
    """Two ``lockrace run`` loops per engine on the same DSN for a minute: every run
    of both stays green (before: duplicate keys, one run dropping the other's tables)."""
    pg_names = ["pg-nowait", "pg-skip-locked", "pg-row-lock-modes"]
    my_names = ["mysql-nowait", "mysql-skip-locked"]
    known = {sc.name for sc in builtins()}
    assert set(pg_names + my_names) <= known
    sandboxes = r"SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE 'lockrace\\_%%'"
    before = set(_mysql_query(mysql_dsn, sandboxes))
    jobs = [(["run", *pg_names, "--pg", pg_dsn.dsn(pg_db)], "PostgreSQL", len(pg_names))] * 2 + \
           [(["run", *my_names, "--mysql", mysql_dsn.dsn()], mysql_dsn.name, len(my_names))] * 2
    with ThreadPoolExecutor(len(jobs)) as pool:
        futures = [pool.submit(_loop, argv, lockrace_env(), 60) for argv, _, _ in jobs]
        results = [f.result() for f in futures]
    for (argv, server, count), runs in zip(jobs, results):
        print(f"{server}: {len(runs)} runs of {count} scenarios in a minute")
        assert len(runs) >= 2, f"{server}: only {len(runs)} runs in a minute"
        for out in runs:
            assert out.returncode == 0, out.stdout[-3000:] + out.stderr
            assert out.stdout.count(f"Verified against {server}") == count, out.stdout[-3000:]
    # every run dropped its own sandbox
    assert _pg_schemas(pg_dsn, pg_db) == []
    assert set(_mysql_query(mysql_dsn, sandboxes)) <= before


# ------------------------------------------------------------------ finding 4: kill -9


def _blocked(live: LiveRun, engine: str, connect) -> None:
    """Until B, C and D wait for A's row and the server reports A's sleep running;
    ``connect`` opens a connection to that server."""
    assert live.wait_for_line(f"A> {SLEEP[engine]}", 30), live.stdout + live.stderr
    assert live.stdout.count(" is blocked by ") == 3, live.stdout
    eventually(lambda: sleeping(engine, connect), timeout=10, what="A's sleep to run on the server")


def test_kill9_on_pg_dsn_leaves_no_backend(pg_dsn, pg_db, tmp_path):
    """kill -9 while three sessions wait for A's row lock and A sleeps: within a few
    seconds no backend of the run is left (they notice their client is gone), and the
    next run with the same sandbox name removes the old sandbox and runs at once."""
    sandbox = f"lockrace_k9_{uuid.uuid4().hex[:8]}"
    scenario = tmp_path / "blocks.race"
    scenario.write_text(blocking_scenario("postgres"))
    env = lockrace_env(tmp_path, LOCKRACE_SANDBOX=sandbox)
    live = LiveRun(["run", str(scenario), "--step-timeout", "120", "--pg", pg_dsn.dsn(pg_db)], env)
    try:
        _blocked(live, "postgres", pg_dsn.connect)
        assert len(_pg_lockrace_backends(pg_dsn, pg_db)) >= 5  # A-D, the owner (and the monitor)
        live.proc.send_signal(signal.SIGKILL)
        live.proc.wait(5)
    finally:
        live.kill()
    left = eventually(lambda: _pg_lockrace_backends(pg_dsn, pg_db), lambda left: not left, timeout=5, every=0.1,
                      fail=False)
    assert left == [], f"backends of the killed run are still there: {left}"
    assert _pg_schemas(pg_dsn, pg_db) == [sandbox]  # what the dead run left: swept by the next one

    t0 = time.monotonic()
    out = run_lockrace(["run", "pg-nowait", "--pg", pg_dsn.dsn(pg_db)], env, 60)
    took = time.monotonic() - t0
    assert out.returncode == 0, out.stdout + out.stderr
    assert took < 15, f"the next run took {took:.1f} s"
    assert _pg_schemas(pg_dsn, pg_db) == []


def test_kill9_on_mysql_dsn_next_run_sweeps(mysql_dsn, tmp_path):
    """MariaDB notices a dead client only when it next talks to it: A's SLEEP and the
    waiters behind A's row lock outlive a kill -9.  The next lockrace run (any
    sandbox name) sees that their sandbox's owner is gone, ends those connections
    and drops the sandbox."""
    sandbox = f"lockrace_k9_{uuid.uuid4().hex[:8]}"
    scenario = tmp_path / "blocks.race"
    scenario.write_text(blocking_scenario("mysql"))
    live = LiveRun(["run", str(scenario), "--step-timeout", "120", "--mysql", mysql_dsn.dsn()],
                   lockrace_env(tmp_path, LOCKRACE_SANDBOX=sandbox))
    try:
        _blocked(live, "mysql", mysql_dsn.connect)
        live.proc.send_signal(signal.SIGKILL)
        live.proc.wait(5)
    finally:
        live.kill()
    try:
        time.sleep(0.5)
        orphans = _mysql_query(mysql_dsn, "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = %s", (sandbox,))
        assert orphans, "expected the killed run's sleeping and waiting connections on the server"
        t0 = time.monotonic()
        out = run_lockrace(["run", "mysql-nowait", "--mysql", mysql_dsn.dsn()], lockrace_env(), 60)
        took = time.monotonic() - t0
        assert out.returncode == 0, out.stdout + out.stderr
        assert took < 20, f"the next run took {took:.1f} s"
        assert _mysql_query(mysql_dsn, "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = %s", (sandbox,)) == []
        assert _mysql_query(mysql_dsn, "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s",
                            (sandbox,)) == []
    finally:
        _mysql_query(mysql_dsn, f"DROP DATABASE IF EXISTS `{sandbox}`")


def _descendants(pid: int) -> set[int]:
    """Processes whose parent chain leads to ``pid`` (read from /proc)."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                parents[int(entry.name)] = int(fields[1])
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _alive(pids: set[int]) -> set[int]:
    alive = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.add(pid)
    return alive


@pytest.mark.parametrize("engine", ["postgres", "mysql"])
def test_kill9_with_private_server_leaves_no_server(engine, tmp_path, server_tmp):
    """kill -9 of ``lockrace run`` on its own private server while three sessions wait
    and one sleeps: the server and every one of its processes is gone within a few
    seconds; the next run removes the dead server's temp dir."""
    scenario = tmp_path / "blocks.race"
    scenario.write_text(blocking_scenario(engine))
    env = lockrace_env(server_tmp)
    live = LiveRun(["run", str(scenario), "--step-timeout", "120"], env)
    try:
        _blocked(live, engine, private_server_connect(engine, server_tmp))
        server = _descendants(live.proc.pid)
        assert server, "no server process under lockrace"
        dirs = sorted(p.name for p in server_tmp.glob(f"lockrace-{engine}-*"))
        assert len(dirs) == 1, dirs
        live.proc.send_signal(signal.SIGKILL)
        live.proc.wait(5)
    finally:
        live.kill()
    left = eventually(lambda: _alive(server), lambda left: not left, timeout=5, every=0.1, fail=False)
    assert not left, f"server processes outlived lockrace: {[processes_mentioning(str(p)) for p in left]}"

    # the next start sweeps the dead server's directory once it is old enough to be surely dead
    old = server_tmp / dirs[0]
    past = time.time() - 120
    os.utime(old, (past, past))
    out = run_lockrace(["run", f"{'pg' if engine == 'postgres' else 'mysql'}-nowait"], env, 90)
    assert out.returncode == 0, out.stdout + out.stderr
    assert not old.exists(), f"{old} was not swept"
    assert list(server_tmp.glob(f"lockrace-{engine}-*")) == []


# ------------------------------------------------------------------ finding 3 (part): bounded teardown

HOLD = {"postgres": "SELECT pg_sleep(4);", "mysql": "SELECT SLEEP(4);"}


def _quiet_scenario(engine: str) -> str:
    """A scenario with no teardown of its own: the sandbox DROP is the teardown."""
    return f"""title: a foreign client gets in
engines: {engine}
setup:
{accounts_setup(100)}
A> SELECT balance FROM accounts WHERE id = 1;
    row: 100
A> {HOLD[engine]}
"""


@pytest.mark.parametrize("engine", ["postgres", "mysql"])
def test_teardown_drop_behind_a_foreign_lock_is_bounded(engine, tmp_path, pg_dsn, pg_db, mysql_dsn):
    """Another client holds a lock on a sandbox table when lockrace drops its sandbox:
    the DROP gives up after its bound with one clear sentence, the foreign client is
    not disturbed, and the sandbox stays until a later run finds its owner gone."""
    import psycopg

    sandbox = f"lockrace_td_{uuid.uuid4().hex[:8]}"
    scenario = tmp_path / "foreign.race"
    scenario.write_text(_quiet_scenario(engine))
    flags = ["--pg", pg_dsn.dsn(pg_db)] if engine == "postgres" else ["--mysql", mysql_dsn.dsn()]
    live = LiveRun(["run", str(scenario), "--step-timeout", "30", *flags], lockrace_env(tmp_path, LOCKRACE_SANDBOX=sandbox))
    foreign = None
    try:
        assert live.wait_for_line(f"A> {HOLD[engine]}", 30), live.stdout + live.stderr
        if engine == "postgres":
            foreign = psycopg.connect(pg_dsn.dsn(pg_db), application_name="fault-foreign", connect_timeout=5)
            foreign.execute(f"LOCK TABLE {sandbox}.accounts IN ACCESS SHARE MODE")  # open transaction
        else:
            foreign = mysql_dsn.connect()
            cur = foreign.cursor()
            cur.execute("BEGIN")
            cur.execute(f"SELECT * FROM `{sandbox}`.accounts")  # a metadata lock until COMMIT
        assert live.wait_for_line("Verified against", 15), live.stdout + live.stderr
        t0 = time.monotonic()
        code = live.finish(DDL_LOCK_WAIT_S + 20)
        took = time.monotonic() - t0
        assert code == 0, live.stdout + live.stderr
        assert took < DDL_LOCK_WAIT_S + 5, f"teardown took {took:.1f} s"
        assert "Traceback" not in live.stderr
        lines = live.stderr.strip().splitlines()
        assert len(lines) == 1, live.stderr
        kind = "schema" if engine == "postgres" else "database"
        assert f"could not drop the sandbox {kind} {sandbox}: another client holds a lock in it" in lines[0], lines
        assert f"waits at most {DDL_LOCK_WAIT_S} s" in lines[0]
        if engine == "postgres":
            assert "fault-foreign" in lines[0]  # it names who holds the lock
            assert foreign.execute(f"SELECT balance FROM {sandbox}.accounts").fetchall() == [(100,)]
            foreign.rollback()
            assert _pg_schemas(pg_dsn, pg_db) == [sandbox]
        else:
            if mysql_dsn.name == "MySQL":  # its metadata_locks say who holds the lock
                assert f"(connection {foreign.thread_id()} (root))" in lines[0], lines[0]
            cur.execute(f"SELECT balance FROM `{sandbox}`.accounts")
            assert cur.fetchall() == ((100,),)
            cur.execute("COMMIT")
            assert _mysql_query(mysql_dsn, "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA"
                                " WHERE SCHEMA_NAME = %s", (sandbox,)) == [(sandbox,)]
        # the lock is gone and so is its owner: the next run (another sandbox) removes it
        out = run_lockrace(["run", "pg-nowait" if engine == "postgres" else "mysql-nowait", *flags],
                           lockrace_env(), 60)
        assert out.returncode == 0, out.stdout + out.stderr
        if engine == "postgres":
            assert _pg_schemas(pg_dsn, pg_db) == []
        else:
            assert _mysql_query(mysql_dsn, "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA"
                                " WHERE SCHEMA_NAME = %s", (sandbox,)) == []
    finally:
        live.kill()
        if foreign is not None:
            foreign.close()
        if engine == "mysql":
            _mysql_query(mysql_dsn, f"DROP DATABASE IF EXISTS `{sandbox}`")


@pytest.mark.mysql_only
@pytest.mark.parametrize("routines", [True, False], ids=["marked", "no CREATE ROUTINE"])
def test_teardown_behind_a_foreign_lock_on_mysql(tmp_path, mysql_server, routines):
    """MySQL takes no database comment: the sandbox is marked by an empty procedure in
    it, so when a foreign lock keeps the final DROP from happening a later run removes
    it.  An account that may not create routines there gets an unmarked sandbox, and the
    sentence gives the statement that removes it instead of promising a later run."""
    import pymysql

    kw = mysql_server.mysql_kwargs
    sock = kw["unix_socket"]
    sandbox = f"lockrace_td_{uuid.uuid4().hex[:8]}"
    user = f"lr_td_{uuid.uuid4().hex[:6]}"
    root = pymysql.connect(unix_socket=sock, user="root", password="", autocommit=True)
    rc = root.cursor()
    rc.execute(f"CREATE USER '{user}'@'localhost'")
    rc.execute(f"GRANT ALL ON `{sandbox}`.* TO '{user}'@'localhost'")
    rc.execute(f"GRANT PROCESS ON *.* TO '{user}'@'localhost'")  # the lock views, as a DSN user has them
    rc.execute(f"GRANT SELECT ON performance_schema.* TO '{user}'@'localhost'")
    if not routines:
        rc.execute(f"REVOKE CREATE ROUTINE ON `{sandbox}`.* FROM '{user}'@'localhost'")
    scenario = tmp_path / "foreign.race"
    scenario.write_text(_quiet_scenario("mysql"))
    flags = ["--mysql", f"mysql://{user}@localhost/?unix_socket={sock}"]
    env = lockrace_env(tmp_path, LOCKRACE_SANDBOX=sandbox)
    live = LiveRun(["run", str(scenario), "--step-timeout", "30", *flags], env)
    foreign = pymysql.connect(unix_socket=sock, user="root", password="", autocommit=True)
    try:
        cur = foreign.cursor()
        assert live.wait_for_line(f"A> {HOLD['mysql']}", 30), live.stdout + live.stderr
        cur.execute("SELECT count(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = %s", (sandbox,))
        assert cur.fetchone()[0] == (1 if routines else 0)
        cur.execute(f"SHOW TABLES FROM `{sandbox}`")
        assert [t for (t,) in cur.fetchall()] == ["accounts"]  # the mark is in no table list
        cur.execute("BEGIN")
        cur.execute(f"SELECT * FROM `{sandbox}`.accounts")  # a metadata lock until COMMIT
        assert live.wait_for_line("Verified against", 15), live.stdout + live.stderr
        assert live.finish(DDL_LOCK_WAIT_S + 20) == 0, live.stdout + live.stderr
        lines = live.stderr.strip().splitlines()
        assert len(lines) == 1, live.stderr
        assert f"could not drop the sandbox database {sandbox}: another client holds a lock in it (connection {foreign.thread_id()} (root))" in lines[0], lines[0]
        if routines:
            assert "(a later lockrace run removes it once that lock is gone)" in lines[0], lines[0]
        else:
            assert f"DROP DATABASE `{sandbox}` once that lock is gone" in lines[0], lines[0]
            assert "a later lockrace run removes it" not in lines[0]
        cur.execute(f"SELECT balance FROM `{sandbox}`.accounts")  # the foreign transaction is as it was
        assert cur.fetchall() == ((100,),)
        cur.execute("COMMIT")
        # a later run (root's, in a sandbox of its own) removes the marked one, leaves the unmarked
        env.pop("LOCKRACE_SANDBOX")
        later = run_lockrace(["run", str(scenario), "--mysql", f"mysql://root@localhost/?unix_socket={sock}"], env)
        assert later.returncode == 0, later.stdout + later.stderr
        cur.execute("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s", (sandbox,))
        assert cur.fetchall() == (() if routines else ((sandbox,),))
    finally:
        live.kill()
        foreign.cursor().execute(f"DROP DATABASE IF EXISTS `{sandbox}`")
        foreign.close()
        rc.execute(f"DROP USER IF EXISTS '{user}'@'localhost'")
        root.close()


# ------------------------------------------------------------------ prepared transactions (PostgreSQL)

PREPARED = """title: a transaction prepared and never finished
engines: postgres
setup:
    CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL);
    INSERT INTO accounts VALUES (1, 100);

A> BEGIN;
A> UPDATE accounts SET balance = 1 WHERE id = 1;
A> PREPARE TRANSACTION '{gid}';
    tag: PREPARE TRANSACTION
B> SELECT pg_sleep({sleep});
"""


def test_pg_prepared_transactions_in_the_sandbox_are_rolled_back(pg_server, tmp_path):
    """A scenario leaves a prepared transaction holding locks in the sandbox (it outlives
    its session).  At the end of the run lockrace rolls it back so that its DROP goes
    through; after a kill -9, the next run does it for the dead run's sandbox.  Prepared
    transactions that lock nothing in a lockrace sandbox are never touched.

    Runs on the tests' own private PostgreSQL, given by DSN (max_prepared_transactions
    is 10 there; 0 on a default server)."""
    import psycopg

    dsn = pg_server.conninfo
    token = uuid.uuid4().hex[:8]
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute("CREATE TABLE IF NOT EXISTS public.fault_foreign_px (id int)")
        with psycopg.connect(dsn) as other:  # a foreign prepared transaction: must survive
            other.execute("INSERT INTO public.fault_foreign_px VALUES (1)")
            other.execute(f"PREPARE TRANSACTION 'foreign_{token}'")

        def prepared() -> set[str]:
            return {r[0] for r in admin.execute("SELECT gid FROM pg_prepared_xacts").fetchall()}

        def schemas(name: str) -> int:
            return admin.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s", [name]).fetchone()[0]

        try:
            # 1. a finished run cleans up its own prepared transaction
            sandbox = f"lockrace_px_{token}"
            scenario = tmp_path / "px.race"
            scenario.write_text(PREPARED.format(gid=f"px_{token}", sleep=0))
            out = run_lockrace(["run", str(scenario), "--pg", dsn], lockrace_env(LOCKRACE_SANDBOX=sandbox), 60)
            assert out.returncode == 0, out.stdout + out.stderr
            assert out.stderr == "", out.stderr
            assert f"px_{token}" not in prepared() and f"foreign_{token}" in prepared()
            assert schemas(sandbox) == 0

            # 2. a killed run's prepared transaction is rolled back by the next run
            sandbox2 = f"lockrace_px2_{token}"
            scenario.write_text(PREPARED.format(gid=f"px2_{token}", sleep=60))
            live = LiveRun(["run", str(scenario), "--step-timeout", "120", "--pg", dsn],
                           lockrace_env(tmp_path, LOCKRACE_SANDBOX=sandbox2))
            try:
                assert live.wait_for_line("B> SELECT pg_sleep(60);", 30), live.stdout + live.stderr
                live.proc.send_signal(signal.SIGKILL)
                live.proc.wait(5)
            finally:
                live.kill()
            assert f"px2_{token}" in prepared() and schemas(sandbox2) == 1
            out = run_lockrace(["run", "pg-nowait", "--pg", dsn], lockrace_env(), 60)
            assert out.returncode == 0, out.stdout + out.stderr
            assert f"px2_{token}" not in prepared(), "the dead run's prepared transaction is still there"
            assert f"foreign_{token}" in prepared(), "a prepared transaction lockrace did not make was ended"
            assert schemas(sandbox2) == 0
        finally:
            for gid in prepared() & {f"foreign_{token}", f"px_{token}", f"px2_{token}"}:
                admin.execute(f"ROLLBACK PREPARED '{gid}'")
            for name in (f"lockrace_px_{token}", f"lockrace_px2_{token}"):
                admin.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
            admin.execute("DROP TABLE IF EXISTS public.fault_foreign_px")


# ------------------------------------------------------------------ the owner connection is ended by someone


@pytest.mark.parametrize("engine", ["postgres", "mysql"])
async def test_owner_connection_ended_lock_is_taken_again(engine, pg_dsn, pg_db, mysql_dsn, monkeypatch):
    """Someone ends the connection that holds the sandbox's lock (pg_terminate_backend,
    KILL): while it is gone the sandbox looks abandoned, and the next sandbox reset
    takes the lock again, so other lockrace processes leave the sandbox alone."""
    import asyncio

    from lockrace.backends import open_backend
    from lockrace.backends.sandbox import advisory_key, named_lock
    from lockrace.servers.target import mysql_target, pg_target

    sandbox = f"lockrace_ow_{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("LOCKRACE_SANDBOX", sandbox)
    if engine == "postgres":
        backend = await open_backend(pg_target(pg_dsn.dsn(pg_db)))

        def lock_free() -> bool:
            with pg_dsn.connect(pg_db) as conn:
                got = conn.execute("SELECT pg_try_advisory_lock(%s::int4, %s::int4)", advisory_key(sandbox)).fetchone()[0]
                return bool(got)  # (released when this connection closes)

        def end_owner() -> None:
            with pg_dsn.connect(pg_db) as conn:
                assert conn.execute("SELECT pg_terminate_backend(%s)", [backend.owner.info.backend_pid]).fetchone()[0]
    else:
        backend = await open_backend(mysql_target(mysql_dsn.dsn()))

        def lock_free() -> bool:
            return str(_mysql_query(mysql_dsn, "SELECT IS_FREE_LOCK(%s)", (named_lock(sandbox),))[0][0]) == "1"

        def end_owner() -> None:
            _mysql_query(mysql_dsn, f"KILL CONNECTION {int(backend.owner.thread_id())}")
    try:
        assert not await asyncio.to_thread(lock_free)
        await asyncio.to_thread(end_owner)
        for _ in range(50):
            if await asyncio.to_thread(lock_free):
                break
            await asyncio.sleep(0.05)
        assert await asyncio.to_thread(lock_free), "the owner's lock outlived its connection"
        await backend.reset_sandbox()
        assert not await asyncio.to_thread(lock_free), "the reset did not take the sandbox's lock again"
    finally:
        await backend.drop_sandbox()
    assert await asyncio.to_thread(lock_free)


# ------------------------------------------------------------------ XA transactions (MariaDB)

XA_SCENARIO = """title: an XA transaction prepared and never finished
engines: mysql
setup:
    CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL) ENGINE=InnoDB;
    INSERT INTO accounts VALUES (1, 100);

A> XA START '{xid}';
A> UPDATE accounts SET balance = 1 WHERE id = 1;
A> XA END '{xid}';
A> XA PREPARE '{xid}';
"""


def test_mysql_prepared_xa_of_the_run_is_rolled_back(mysql_dsn, tmp_path):
    """A session's XA PREPARE outlives its connection (MariaDB 10.5+) and keeps its
    locks: at the end of the run lockrace rolls back the XA transactions its own
    sessions prepared, so its DROP DATABASE goes through.  Another client's prepared
    XA transaction is not touched."""
    token = uuid.uuid4().hex[:8]
    sandbox, other_db = f"lockrace_xa_{token}", f"fault_xa_{token}"
    xid, foreign_xid = f"lockrace_fault_{token}", f"foreign_{token}"
    _mysql_query(mysql_dsn, f"CREATE DATABASE `{other_db}`")
    _mysql_query(mysql_dsn, f"CREATE TABLE `{other_db}`.t (id int PRIMARY KEY) ENGINE=InnoDB")
    foreign = mysql_dsn.connect()
    try:
        cur = foreign.cursor()
        for sql in (f"XA START '{foreign_xid}'", f"INSERT INTO `{other_db}`.t VALUES (1)",
                    f"XA END '{foreign_xid}'", f"XA PREPARE '{foreign_xid}'"):
            cur.execute(sql)
        scenario = tmp_path / "xa.race"
        scenario.write_text(XA_SCENARIO.format(xid=xid))
        t0 = time.monotonic()
        out = run_lockrace(["run", str(scenario), "--mysql", mysql_dsn.dsn()], lockrace_env(LOCKRACE_SANDBOX=sandbox), 60)
        took = time.monotonic() - t0
        assert out.returncode == 0, out.stdout + out.stderr
        assert out.stderr == "", out.stderr
        assert took < 15, f"took {took:.1f} s"
        recovered = {row[3] for row in _mysql_query(mysql_dsn, "XA RECOVER")}
        recovered = {x.decode() if isinstance(x, bytes) else x for x in recovered}
        assert xid not in recovered, "the run's prepared XA transaction is still there"
        assert foreign_xid in recovered, "another client's prepared XA transaction was ended"
        assert _mysql_query(mysql_dsn, "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s",
                            (sandbox,)) == []
    finally:
        foreign.close()
        for x in (xid, foreign_xid):
            try:
                _mysql_query(mysql_dsn, f"XA ROLLBACK '{x}'")
            except Exception:
                pass
        _mysql_query(mysql_dsn, f"DROP DATABASE IF EXISTS `{other_db}`")
        _mysql_query(mysql_dsn, f"DROP DATABASE IF EXISTS `{sandbox}`")


@pytest.mark.parametrize("engine", ["postgres", "mysql"])
async def test_refused_name_is_let_go(engine, pg_dsn, pg_db, mysql_dsn, monkeypatch):
    """A process (the app) that was refused a sandbox name holds on to nothing: asking
    again gives the same answer, not 'in use by another lockrace process'."""
    from lockrace.backends import open_backend
    from lockrace.backends.sandbox import SandboxError
    from lockrace.servers.target import mysql_target, pg_target

    name = f"fault_taken_{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("LOCKRACE_SANDBOX", name)
    if engine == "postgres":
        with pg_dsn.connect(pg_db) as conn:
            conn.execute(f"CREATE SCHEMA {name}")
        target = lambda: pg_target(pg_dsn.dsn(pg_db))  # noqa: E731
    else:
        _mysql_query(mysql_dsn, f"CREATE DATABASE `{name}`")
        target = lambda: mysql_target(mysql_dsn.dsn())  # noqa: E731
    try:
        for _ in range(2):
            with pytest.raises(SandboxError) as err:
                await open_backend(target())
            assert "already exists and is not a lockrace sandbox" in str(err.value)
    finally:
        if engine == "mysql":
            _mysql_query(mysql_dsn, f"DROP DATABASE IF EXISTS `{name}`")


async def test_pg_sweep_of_a_dead_namesake_spares_the_new_owner(pg_dsn, pg_db, monkeypatch):
    """A run reuses the LOCKRACE_SANDBOX name of a run that died: sweeping the dead run's
    backends (same application_name prefix) ends those, not the new run's own lock holder."""
    import asyncio

    import psycopg

    from lockrace.backends import open_backend
    from lockrace.backends.sandbox import advisory_key
    from lockrace.servers.target import pg_target

    sandbox = f"lockrace_ns_{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("LOCKRACE_SANDBOX", sandbox)
    dead = await open_backend(pg_target(pg_dsn.dsn(pg_db)))
    # the dead run: its lock holder is gone, one of its session backends is still there
    stale = psycopg.connect(pg_dsn.dsn(pg_db), autocommit=True, application_name=f"lockrace {sandbox} A")
    dead.owner.close()
    dead.owner = None
    backend = await open_backend(pg_target(pg_dsn.dsn(pg_db)))
    try:
        with pg_dsn.connect(pg_db) as conn:
            got = conn.execute("SELECT pg_try_advisory_lock(%s::int4, %s::int4)", advisory_key(sandbox)).fetchone()[0]
        assert not got, "the new run's lock holder was ended by its own sweep"
        assert not backend.owner.closed and backend.owner.execute("SELECT 1").fetchone() == (1,)
        await asyncio.sleep(0.2)
        with pytest.raises(psycopg.OperationalError):
            stale.execute("SELECT 1")  # the dead run's backend was ended
    finally:
        stale.close()
        await backend.drop_sandbox()
