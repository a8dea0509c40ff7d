"""Fault matrix 3 and 6 (stuck): nothing the server does can keep lockrace from
ending, and nothing it does on its own behalf waits for ever.

* SIGINT ends ``lockrace run`` within 2 s with status 130 whatever the server
  is doing: teardown waiting behind another client's lock, a session left
  with a prepared transaction (PREPARE TRANSACTION / XA PREPARE), setup SQL
  still running, a server frozen with SIGSTOP.  What can be cleaned is: the
  prepared transaction is rolled back, no connection of the run is left.
* The monitor connection ended by the server (pg_terminate_backend, KILL,
  idle_session_timeout) is replaced: a later block is still detected.
* ``COPY ... FROM STDIN`` / ``TO STDOUT`` is refused with a clear message and
  the session stays usable.
* More sessions than the server accepts: one sentence, exit 2.
* A step that loses its connection without ``expect: connection_lost`` fails
  the run (exit 1).

The servers are real: the tests' own private servers, given to lockrace by DSN
(a server lockrace did not start), and for the frozen-server and
max_connections cases servers this module starts, freezes and stops itself.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid

import psycopg
import pymysql
import pytest
from support.waits import eventually
from support.cli import LiveRun, lockrace_env, run_lockrace, server_tmp  # noqa: F401
from support.scenarios import accounts, accounts_setup

from lockrace.core.events import ServerNote
from lockrace.servers.embedded_postgres import EmbeddedPostgres
from lockrace.servers.target import Target, mysql_target, pg_target

SLEEP = {"postgres": "SELECT pg_sleep({s})", "mysql": "SELECT SLEEP({s})"}


def _token() -> str:
    return uuid.uuid4().hex[:8]


def _dsn_flags(engine: str, target: Target) -> list[str]:
    if engine == "postgres":
        return ["--pg", target.conninfo]
    return ["--mysql", f"mysql://root@localhost/?unix_socket={target.mysql_kwargs['unix_socket']}"]


def _pg(target: Target) -> psycopg.Connection:
    return psycopg.connect(target.conninfo, autocommit=True, application_name="fault-check", connect_timeout=5)


def _my(target: Target) -> pymysql.connections.Connection:
    return pymysql.connect(**target.mysql_kwargs, autocommit=True, connect_timeout=5)


def _query(engine: str, target: Target, sql: str, args=None) -> list[tuple]:
    if engine == "postgres":
        with _pg(target) as conn:
            cur = conn.execute(sql, args)
            return cur.fetchall() if cur.description else []
    conn = _my(target)
    try:
        cur = conn.cursor()
        cur.execute(sql, args)
        return list(cur.fetchall()) if cur.description else []
    finally:
        conn.close()


def _schema_of(engine: str, target: Target, table: str) -> str | None:
    """The sandbox lockrace made the run's (uniquely named) table in."""
    if engine == "postgres":
        rows = _query(engine, target, "SELECT schemaname FROM pg_tables WHERE tablename = %s", [table])
    else:
        rows = _query(engine, target, "SELECT TABLE_SCHEMA FROM information_schema.TABLES WHERE TABLE_NAME = %s",
                      (table,))
    return rows[0][0] if rows else None


def _lockrace_connections(engine: str, target: Target, schema: str | None) -> list[tuple]:
    if engine == "postgres":
        return _query(engine, target, "SELECT pid, application_name, state, query FROM pg_stat_activity"
                                      " WHERE application_name LIKE 'lockrace%%'")
    if schema is None:
        return []
    return _query(engine, target, "SELECT ID, COMMAND, INFO FROM information_schema.PROCESSLIST WHERE DB = %s",
                  (schema,))


def _wait_for(predicate, timeout: float, what: str):
    return eventually(predicate, timeout=timeout, what=what)


def _drop_schema(engine: str, target: Target, schema: str | None) -> None:
    """Remove what this test's run created (its uniquely named sandbox), if it is still there."""
    if not schema:
        return
    if engine == "postgres":
        _query(engine, target, f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    else:
        _query(engine, target, f"DROP DATABASE IF EXISTS `{schema}`")


def _interrupt(live: LiveRun, sig: int = signal.SIGINT) -> tuple[int, float]:
    t0 = time.monotonic()
    live.proc.send_signal(sig)
    try:
        code = live.proc.wait(10)
    except Exception:
        live.kill()
        raise
    took = time.monotonic() - t0
    live.finish(5)
    return code, took


def _assert_interrupted(live: LiveRun, code: int, took: float) -> None:
    text = live.stdout + live.stderr
    assert code == 130, (code, text)
    assert took <= 2.0, f"took {took:.2f} s to exit after SIGINT"
    assert "Traceback" not in text, text
    assert live.stderr.strip().splitlines()[-1] == "lockrace: interrupted; statements cancelled, servers stopped"


# ------------------------------------------------------------------ teardown behind a foreign lock

@pytest.mark.parametrize("engine", ["postgres", "mysql"])
def test_sigint_while_teardown_waits_behind_a_foreign_lock(engine, tmp_path, pg_server, mysql_server):
    """Another client holds a lock on the sandbox table; the scenario's teardown
    (DROP TABLE) waits for it.  SIGINT: exit 130 within 2 s, no connection of
    the run left on the server."""
    target = pg_server if engine == "postgres" else mysql_server
    table = f"stuck_{_token()}"
    scenario = tmp_path / "teardown.race"
    scenario.write_text(f"""title: teardown behind a foreign lock
engines: {engine}
setup:
    CREATE TABLE {table} (id int PRIMARY KEY);
teardown:
    DROP TABLE IF EXISTS {table};

A> {SLEEP[engine].format(s=1)};
""")
    live = LiveRun(["run", str(scenario), "--step-timeout", "120", *_dsn_flags(engine, target)],
                   lockrace_env(tmp_path, LOCKRACE_SANDBOX=f"lockrace_td_{_token()}"))
    foreign = None
    schema = None
    try:
        assert live.wait_for_line("A> ", 30), live.stdout + live.stderr
        schema = _schema_of(engine, target, table)
        assert schema, "the run's table is not there"
        # another client reads the table inside a transaction: its lock outlives the read
        if engine == "postgres":
            foreign = _pg(target)
            foreign.execute("BEGIN")
            foreign.execute(f'LOCK TABLE "{schema}".{table} IN ACCESS SHARE MODE')
            waiting = ("SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'lockrace%%'"
                       " AND wait_event_type = 'Lock' AND query LIKE 'DROP TABLE%%'")
        else:
            foreign = _my(target)
            foreign.cursor().execute("BEGIN")
            foreign.cursor().execute(f"SELECT * FROM `{schema}`.{table}")
            waiting = ("SELECT ID FROM information_schema.PROCESSLIST"
                       " WHERE STATE LIKE 'Waiting for table metadata lock' AND INFO LIKE 'DROP TABLE%%'")
        _wait_for(lambda: _query(engine, target, waiting), 15, "the teardown to wait behind the foreign lock")
        time.sleep(0.2)
        code, took = _interrupt(live)
        _assert_interrupted(live, code, took)
        _wait_for(lambda: _lockrace_connections(engine, target, schema) == [], 5, "the run's connections to go")
    finally:
        live.kill()
        if foreign is not None:
            foreign.close()
        _drop_schema(engine, target, schema)


@pytest.mark.parametrize("engine", ["postgres", "mysql"])
def test_teardown_behind_a_foreign_lock_is_bounded_by_the_step_timeout(engine, tmp_path, pg_server, mysql_server):
    """No signal: the teardown that waits behind another client's lock gives up
    after --step-timeout (the server's own bound on lockrace's statement) and
    the run ends, saying why, instead of waiting for ever."""
    target = pg_server if engine == "postgres" else mysql_server
    table = f"stuck_{_token()}"
    scenario = tmp_path / "teardown.race"
    scenario.write_text(f"""title: teardown behind a foreign lock
engines: {engine}
setup:
    CREATE TABLE {table} (id int PRIMARY KEY);
teardown:
    DROP TABLE IF EXISTS {table};

A> {SLEEP[engine].format(s=1)};
""")
    live = LiveRun(["run", str(scenario), "--step-timeout", "2", *_dsn_flags(engine, target)],
                   lockrace_env(tmp_path, LOCKRACE_SANDBOX=f"lockrace_tb_{_token()}"))
    foreign = None
    schema = None
    try:
        assert live.wait_for_line("A> ", 30), live.stdout + live.stderr
        schema = _schema_of(engine, target, table)
        if engine == "postgres":
            foreign = _pg(target)
            foreign.execute("BEGIN")
            foreign.execute(f'LOCK TABLE "{schema}".{table} IN ACCESS SHARE MODE')
        else:
            foreign = _my(target)
            foreign.cursor().execute("BEGIN")
            foreign.cursor().execute(f"SELECT * FROM `{schema}`.{table}")
        t0 = time.monotonic()
        code = live.finish(30)
        took = time.monotonic() - t0
    finally:
        live.kill()
        if foreign is not None:
            foreign.close()
        _drop_schema(engine, target, schema)
    assert code == 0, live.stdout + live.stderr  # the steps held; the teardown's trouble is reported
    assert "Traceback" not in live.stdout + live.stderr
    assert took < 10, f"took {took:.1f} s"
    teardown = [line for line in live.stdout.splitlines() if line.startswith("-- teardown:")]
    # PostgreSQL: statement_timeout; MariaDB: max_statement_time or lock_wait_timeout, whichever fires first
    assert teardown and any(w in teardown[0].lower() for w in ("timeout", "max_statement_time", "lock wait")), \
        live.stdout


# ------------------------------------------------------------------ prepared transactions

def _prepared(engine: str, target: Target, gid: str) -> list[tuple]:
    if engine == "postgres":
        return _query(engine, target, "SELECT gid FROM pg_prepared_xacts WHERE gid = %s", [gid])
    return [r for r in _query(engine, target, "XA RECOVER") if gid in str(r[3])]


def _prepare_scenario(engine: str, table: str, gid: str, then_sleep: bool) -> str:
    if engine == "postgres":
        steps = f"""A> BEGIN;
A> INSERT INTO {table} VALUES (1);
A> PREPARE TRANSACTION '{gid}';
"""
    else:
        steps = f"""A> XA START '{gid}';
A> INSERT INTO {table} VALUES (1);
A> XA END '{gid}';
A> XA PREPARE '{gid}';
"""
    if then_sleep:
        steps += f"B> {SLEEP[engine].format(s=60)};\n"
    return f"""title: a prepared transaction left behind
engines: {engine}
setup:
    CREATE TABLE {table} (id int PRIMARY KEY);
teardown:
    DROP TABLE IF EXISTS {table};

{steps}"""


@pytest.mark.parametrize("engine", ["postgres", "mysql"])
def test_sigint_after_a_prepared_transaction_leaves_none(engine, tmp_path, pg_server, mysql_server):
    """A session prepared a transaction (it outlives the session and keeps its
    locks); SIGINT while another sleeps: exit 130 within 2 s, and the prepared
    transaction is rolled back, not left on the server."""
    target = pg_server if engine == "postgres" else mysql_server
    token = _token()
    table, gid = f"prep_{token}", f"lockrace_test_{token}"
    scenario = tmp_path / "prepared.race"
    scenario.write_text(_prepare_scenario(engine, table, gid, then_sleep=True))
    live = LiveRun(["run", str(scenario), "--step-timeout", "120", *_dsn_flags(engine, target)],
                   lockrace_env(tmp_path, LOCKRACE_SANDBOX=f"lockrace_px_{token}"))
    schema = None
    try:
        assert live.wait_for_line("B> ", 30), live.stdout + live.stderr
        schema = _schema_of(engine, target, table)
        assert _prepared(engine, target, gid), "the scenario did not prepare its transaction"
        time.sleep(0.3)
        code, took = _interrupt(live)
        _assert_interrupted(live, code, took)
        assert _prepared(engine, target, gid) == [], "the prepared transaction was left on the server"
        _wait_for(lambda: _lockrace_connections(engine, target, schema) == [], 5, "the run's connections to go")
    finally:
        live.kill()
        for row in _prepared(engine, target, gid):  # never leave one behind, even when the test failed
            _query(engine, target, f"ROLLBACK PREPARED '{gid}'" if engine == "postgres" else f"XA ROLLBACK '{gid}'")
        _drop_schema(engine, target, schema)


@pytest.mark.parametrize("engine", ["postgres", "mysql"])
def test_run_rolls_back_the_prepared_transactions_it_left(engine, tmp_path, pg_server, mysql_server):
    """No signal: the run ends by itself, its teardown (DROP TABLE, which the
    prepared transaction's locks would block for ever) runs, and nothing
    prepared is left."""
    target = pg_server if engine == "postgres" else mysql_server
    token = _token()
    table, gid = f"prep_{token}", f"lockrace_test_{token}"
    scenario = tmp_path / "prepared.race"
    scenario.write_text(_prepare_scenario(engine, table, gid, then_sleep=False))
    t0 = time.monotonic()
    out = run_lockrace(["run", str(scenario), "--step-timeout", "5", *_dsn_flags(engine, target)],
                       lockrace_env(tmp_path, LOCKRACE_SANDBOX=f"lockrace_px_{token}"), timeout=60)
    try:
        assert out.returncode == 0, out.stdout + out.stderr
        assert "teardown" not in out.stdout, out.stdout
        assert time.monotonic() - t0 < 20
        assert _prepared(engine, target, gid) == []
        assert _schema_of(engine, target, table) is None, "the teardown did not drop the table"
    finally:
        for row in _prepared(engine, target, gid):
            _query(engine, target, f"ROLLBACK PREPARED '{gid}'" if engine == "postgres" else f"XA ROLLBACK '{gid}'")


# ------------------------------------------------------------------ setup SQL interrupted

@pytest.mark.parametrize("engine", ["mysql", "postgres"])
def test_sigint_during_setup_sql_is_not_swallowed(engine, tmp_path, pg_server, mysql_server):
    """SIGINT while the scenario's setup SQL runs: exit 130 (not 0) within 2 s,
    and the setup statement does not go on running on the server."""
    target = pg_server if engine == "postgres" else mysql_server
    token = _token()
    marker = f"setup_{token}"
    sleep = f"SELECT pg_sleep(8), '{marker}'" if engine == "postgres" else f"SELECT SLEEP(8), '{marker}'"
    scenario = tmp_path / "setup.race"
    scenario.write_text(f"""title: a slow setup
engines: {engine}
setup:
    {sleep};

A> SELECT 1;
""")
    live = LiveRun(["run", str(scenario), *_dsn_flags(engine, target)],
                   lockrace_env(tmp_path, LOCKRACE_SANDBOX=f"lockrace_su_{token}"))
    running = ("SELECT pid FROM pg_stat_activity WHERE query LIKE %s AND pid <> pg_backend_pid()"
               if engine == "postgres" else
               "SELECT ID FROM information_schema.PROCESSLIST WHERE INFO LIKE %s AND ID <> CONNECTION_ID()")
    pattern = f"%'{marker}'%"
    try:
        _wait_for(lambda: _query(engine, target, running, [pattern] if engine == "postgres" else (pattern,)), 30,
                  "the setup SQL to run")
        code, took = _interrupt(live)
        _assert_interrupted(live, code, took)
        assert "A> SELECT 1;" not in live.stdout, "the run went on after SIGINT"
        _wait_for(lambda: _query(engine, target, running, [pattern] if engine == "postgres" else (pattern,)) == [],
                  3, "the setup statement to be cancelled on the server")
    finally:
        live.kill()


# ------------------------------------------------------------------ a frozen server

@pytest.fixture(scope="module", params=["postgres", "mysql"])
def freezable(request):
    """A server of this module's own, which a test may freeze (SIGSTOP)."""
    target = (pg_target if request.param == "postgres" else mysql_target)(None)
    try:
        yield target
    finally:
        os.killpg(target.server.proc.pid, signal.SIGCONT) if target.server.running else None
        target.stop()


def test_sigint_with_a_frozen_server(freezable, tmp_path):
    """The server stops answering (SIGSTOP) while sessions wait on it; SIGINT
    still ends the run within 2 s with 130.  The test thaws its server
    afterwards and checks that no connection of the run is left."""
    engine = freezable.family
    scenario = tmp_path / "frozen.race"
    scenario.write_text(f"""title: blocked, then the server freezes
engines: {engine}
setup:
{accounts_setup(100)}
A> BEGIN;
A> UPDATE accounts SET balance = 1 WHERE id = 1;
B> UPDATE accounts SET balance = 2 WHERE id = 1;
    completes-after: 4
A> {SLEEP[engine].format(s=60)};
A> COMMIT;
""")
    live = LiveRun(["run", str(scenario), "--step-timeout", "120", *_dsn_flags(engine, freezable)],
                   lockrace_env(tmp_path, LOCKRACE_SANDBOX=f"lockrace_fz_{_token()}"))
    pgid = freezable.server.proc.pid
    frozen = False
    try:
        assert live.wait_for_line("A> SELECT", 30), live.stdout + live.stderr
        time.sleep(0.3)
        os.killpg(pgid, signal.SIGSTOP)
        frozen = True
        time.sleep(0.3)
        code, took = _interrupt(live)
        _assert_interrupted(live, code, took)
    finally:
        live.kill()
        if frozen:
            os.killpg(pgid, signal.SIGCONT)
    # thawed, the server answers again (what it still runs for the dead client, a
    # 60 s sleep, it ends when it next talks to that client)
    assert _query(engine, freezable, "SELECT 1") in ([(1,)], [("1",)])


def test_sigint_with_its_own_private_server_frozen(tmp_path, server_tmp):
    """lockrace's own private MariaDB frozen: SIGINT ends the run within 2 s with
    130, and the frozen server is killed and its temp dir removed."""
    from support.cli import blocking_scenario, processes_mentioning

    scenario = tmp_path / "blocks.race"
    scenario.write_text(blocking_scenario("mysql"))
    live = LiveRun(["run", str(scenario), "--step-timeout", "120"], lockrace_env(server_tmp))
    pids = []
    try:
        assert live.wait_for_line("A> SELECT SLEEP(60);", 60), live.stdout + live.stderr
        pids = [int(line.split(":", 1)[0]) for line in processes_mentioning(str(server_tmp)) if "mariadbd" in line
                or "mysqld" in line]
        assert pids
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        time.sleep(0.3)
        code, took = _interrupt(live)
        _assert_interrupted(live, code, took)
        _wait_for(lambda: processes_mentioning(str(server_tmp)) == [], 3, "the frozen server to be gone")
        assert sorted(p.name for p in server_tmp.iterdir()) == []
    finally:
        live.kill()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


# ------------------------------------------------------------------ the monitor connection killed

def _kill_connection(engine: str, target: Target, ident: int) -> None:
    if engine == "postgres":
        assert _query(engine, target, "SELECT pg_terminate_backend(%s)", [ident]) == [(True,)]
    else:
        _query(engine, target, f"KILL {int(ident)}")


async def test_monitor_killed_mid_race_blocks_still_detected(engine, backend, make_race, pg_server, mysql_server):
    target = pg_server if engine == "postgres" else mysql_server
    race = await make_race(backend, ("A", "B"))
    notes = []
    race.subscribe(lambda ev: notes.append(ev.text) if isinstance(ev, ServerNote) else None)
    await backend.run_admin(accounts(100))
    await race.run("A", "BEGIN")
    await race.run("A", "UPDATE accounts SET balance = 1 WHERE id = 1")
    b = race.submit("B", "UPDATE accounts SET balance = 2 WHERE id = 1")
    assert await race.wait_blocked_or_done(b, 10)
    # mid-race, while B waits: the server ends the monitor's connection
    first = race.monitor.ident
    await asyncio.to_thread(_kill_connection, engine, target, first)
    await race.run("A", "COMMIT")
    await asyncio.wait_for(b.done.wait(), 10)
    assert b.result.outcome == "ok", b.result
    # a new block is detected, on a new monitor connection
    await race.run("A", "BEGIN")
    await race.run("A", "UPDATE accounts SET balance = 3 WHERE id = 1")
    c = race.submit("B", "UPDATE accounts SET balance = 4 WHERE id = 1")
    assert await race.wait_blocked_or_done(c, 10), "the block was not detected after the monitor was killed"
    assert not c.done.is_set() and c.blockers == ("A",)
    assert race.monitor.ident != first
    assert any("reconnected" in n for n in notes), notes
    # killed again, idle this time: cancelling still works (through a new monitor)
    second = race.monitor.ident
    await asyncio.to_thread(_kill_connection, engine, target, second)
    await asyncio.sleep(0.2)
    assert await race.cancel("B")
    await asyncio.wait_for(c.done.wait(), 10)
    assert c.result.outcome == "cancelled", c.result
    await race.run("A", "ROLLBACK")


async def test_monitor_ended_by_idle_session_timeout_is_replaced(pg_backend, make_race):
    race = await make_race(pg_backend, ("A", "B"))
    await pg_backend.run_admin(accounts(100))
    await race.monitor.conn.execute("SET idle_session_timeout = '100ms'")
    first = race.monitor.ident
    await asyncio.sleep(0.5)  # the server ends the idle monitor
    await race.run("A", "BEGIN")
    await race.run("A", "UPDATE accounts SET balance = 1 WHERE id = 1")
    b = race.submit("B", "UPDATE accounts SET balance = 2 WHERE id = 1")
    assert await race.wait_blocked_or_done(b, 10)
    assert not b.done.is_set() and b.blockers == ("A",)
    assert race.monitor.ident != first
    await race.run("A", "ROLLBACK")
    await asyncio.wait_for(b.done.wait(), 10)


# ------------------------------------------------------------------ COPY FROM STDIN / TO STDOUT

async def test_copy_stdin_stdout_refused_and_session_usable(pg_backend, make_race):
    race = await make_race(pg_backend, ("A",))
    await pg_backend.run_admin(["CREATE TABLE c (x int)", "INSERT INTO c VALUES (1), (2)"])
    for sql in ["COPY c FROM STDIN", "COPY c TO STDOUT", "COPY (SELECT x FROM c) TO STDOUT; SELECT 2",
                "SELECT 1; COPY c FROM STDIN (FORMAT csv)"]:
        res = await asyncio.wait_for(race.run("A", sql), 5)
        assert res.outcome == "error", (sql, res)
        assert "COPY ... FROM STDIN / TO STDOUT" in res.message and "session is usable" in res.message
        ok = await asyncio.wait_for(race.run("A", "SELECT 1"), 5)
        assert (ok.outcome, ok.rows) == ("ok", [("1",)]), (sql, ok)
        assert race.sessions["A"].txn == "idle"
    # inside a transaction the aborted COPY fails the transaction, as any error does
    await race.run("A", "BEGIN")
    res = await asyncio.wait_for(race.run("A", "COPY c FROM STDIN"), 5)
    assert res.outcome == "error"
    assert race.sessions["A"].txn == "failed transaction"
    await race.run("A", "ROLLBACK")
    assert (await race.run("A", "SELECT count(*) FROM c")).rows == [("2",)]


# ------------------------------------------------------------------ more sessions than the server accepts

class _SmallPostgres(EmbeddedPostgres):
    def _argv(self, workdir):
        return super()._argv(workdir) + ["-c", "max_connections=4", "-c", "superuser_reserved_connections=0"]


def _sessions(engine: str, count: int) -> str:
    steps = "\n".join(f"S{n}> SELECT 1;" for n in range(count))
    return f"title: many sessions\nengines: {engine}\n\n{steps}\n"


@pytest.mark.parametrize("engine", ["postgres", "mysql"])
def test_more_sessions_than_max_connections_is_one_sentence(engine, tmp_path, server_tmp, mysql_server):
    # PostgreSQL: max_connections 4, 5 sessions; MariaDB: its smallest max_connections, 10, and 12 sessions
    sessions = 5 if engine == "postgres" else 12
    scenario = tmp_path / "many.race"
    scenario.write_text(_sessions(engine, sessions))
    if engine == "postgres":
        server = _SmallPostgres()
        server.start()
        target = Target("postgres", "embedded", conninfo=server.conninfo(), server=server)
    else:
        # root may always connect beyond max_connections: run lockrace as a plain user
        target = mysql_server
        _query(engine, target, "CREATE USER IF NOT EXISTS 'lr_small'@'localhost'")
        _query(engine, target, "GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, INDEX, ALTER, PROCESS,"
                               " LOCK TABLES ON *.* TO 'lr_small'@'localhost'")
        _query(engine, target, "SET GLOBAL max_connections = 10")
        flags = ["--mysql", f"mysql://lr_small@localhost/?unix_socket={target.mysql_kwargs['unix_socket']}"]
    try:
        out = run_lockrace(["run", str(scenario), *(flags if engine == "mysql" else _dsn_flags(engine, target))],
                           lockrace_env(tmp_path, LOCKRACE_SANDBOX=f"lockrace_mc_{_token()}"), timeout=60)
    finally:
        if engine == "postgres":
            target.stop()
        else:
            _query(engine, target, "SET GLOBAL max_connections = 200")
            _query(engine, target, "DROP USER IF EXISTS 'lr_small'@'localhost'")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Traceback" not in out.stdout + out.stderr, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lockrace: cannot connect to "), out.stderr
    assert "too many" in lines[0].lower() and f"this race needs {sessions + 1} connections" in lines[0], lines[0]


# ------------------------------------------------------------------ lost connections are failures

LOST = {
    # the server ends A's connection in the middle of the scenario; no step says it expects that
    "postgres": "A> SELECT 1;\nA> SELECT pg_terminate_backend(pg_backend_pid());\nB> SELECT 1;\n",
    "mysql": "A> SET SESSION wait_timeout = 1;\nB> DO SLEEP(2.5);\nA> SELECT 1;\nB> SELECT 1;\n",
}


@pytest.mark.parametrize("engine", ["postgres", "mysql"])
def test_unexpected_lost_connection_fails_the_run(engine, tmp_path, pg_server, mysql_server):
    target = pg_server if engine == "postgres" else mysql_server
    scenario = tmp_path / "lost.race"
    scenario.write_text(f"title: a session loses its connection\nengines: {engine}\n\n{LOST[engine]}")
    out = run_lockrace(["run", str(scenario), *_dsn_flags(engine, target)],
                       lockrace_env(tmp_path, LOCKRACE_SANDBOX=f"lockrace_lc_{_token()}"), timeout=60)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "Verified" not in out.stdout
    assert "lost its connection to the server" in out.stdout, out.stdout
    # and when the scenario says it expects it, the same run passes
    expected = LOST[engine].replace("pg_backend_pid());\n", "pg_backend_pid());\n    expect: connection_lost\n") \
        if engine == "postgres" else LOST[engine].replace("A> SELECT 1;\n", "A> SELECT 1;\n    expect: connection_lost\n")
    scenario.write_text(f"title: a session loses its connection\nengines: {engine}\n\n{expected}")
    out = run_lockrace(["run", str(scenario), *_dsn_flags(engine, target)],
                       lockrace_env(tmp_path, LOCKRACE_SANDBOX=f"lockrace_lc_{_token()}"), timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


# ------------------------------------------------------------------ the app, its server frozen

@pytest.mark.parametrize("engine", ["postgres", "mysql"])
def test_app_ends_on_sigterm_with_its_server_frozen(engine, tmp_path, server_tmp):
    """The real app in a pty, sessions waiting; its private server is frozen
    (SIGSTOP), then the app gets SIGTERM: it exits within about 2 s, gives the
    terminal back, and the frozen server is killed and its temp dir removed."""
    from support.cli import blocking_scenario, processes_mentioning
    from support.terminal import Terminal

    scenario = tmp_path / "blocks.race"
    scenario.write_text(blocking_scenario(engine))
    term = Terminal(["--engine", engine, "--scenario", str(scenario)], lockrace_env(server_tmp, TERM="xterm-256color"))
    pids = []
    try:
        assert term.read_until(b"F5 step", 60), term.screen[-2000:]
        os.write(term.master, b"\x1b[17~")  # F6: run to the end
        assert term.read_until(b"waits on", 20), term.screen[-2000:]
        term.read_until(b"\x00never", 1.0)
        pids = [int(line.split(":", 1)[0]) for line in processes_mentioning(str(server_tmp))
                if "postgres" in line or "mariadbd" in line or "mysqld" in line]
        assert pids
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        time.sleep(0.3)
        code, took = term.signal_and_wait(signal.SIGTERM, 20)
        term.assert_ended_cleanly(code, took, 2.5)
        _wait_for(lambda: processes_mentioning(str(server_tmp)) == [], 3, "the frozen server to be gone")
        assert sorted(p.name for p in server_tmp.iterdir()) == []
    finally:
        term.close()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
