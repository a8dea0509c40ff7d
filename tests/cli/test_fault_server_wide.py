"""Fault matrix 7e: server-wide statements are refused on a server lockrace did not start.

ALTER SYSTEM, pg_reload_conf(), CREATE ROLE, SET GLOBAL, ... change the whole
server, not lockrace's sandbox.  They are found by reading the SQL as the
server does (core/sqltext.py), so a comment between the words, a statement
after another on one line, or a scenario's setup, or a spec's, do not slip
through; a word inside a string literal or a comment is not a statement.

DSN servers: 127.0.0.1:5432 / 127.0.0.1:3306 where they answer, the tests'
private servers by socket otherwise (tests/support/dsn.py).
"""

from __future__ import annotations

import pytest
from support.cli import lockrace_env, run_lockrace, server_tmp  # noqa: F401  (fixture)
from support.dsn import mysql_dsn, pg_dsn  # noqa: F401  (fixtures)


# ------------------------------------------------------------------ refused before anything runs


def _auto_conf(pg_dsn) -> list[tuple]:
    """What postgresql.auto.conf holds (ALTER SYSTEM writes there)."""
    with pg_dsn.connect() as conn:
        return conn.execute("SELECT name, setting FROM pg_file_settings"
                            " WHERE sourcefile LIKE '%%postgresql.auto.conf' ORDER BY 1, 2").fetchall()


PG_SCENARIOS = {
    "step": """title: a step sets work_mem for everyone
engines: postgres
setup:
    CREATE TABLE accounts (id int PRIMARY KEY);

A> SELECT 1;
A> ALTER /* x */ SYSTEM SET work_mem='7MB';
A> SELECT pg_reload_conf();
""",
    "setup": """title: the setup sets work_mem for everyone
engines: postgres
setup:
    CREATE TABLE accounts (id int PRIMARY KEY);
    ALTER SYSTEM SET work_mem = '7MB';

A> SELECT 1;
""",
}


@pytest.mark.parametrize("where", list(PG_SCENARIOS))
def test_pg_scenario_with_alter_system_is_refused_on_a_dsn(where, pg_dsn, tmp_path):
    before = _auto_conf(pg_dsn)
    scenario = tmp_path / "wide.race"
    scenario.write_text(PG_SCENARIOS[where])
    try:
        out = run_lockrace(["run", str(scenario), "--pg", pg_dsn.dsn()], lockrace_env(), 60)
        assert out.returncode == 2, out.stdout + out.stderr
        lines = out.stderr.strip().splitlines()
        assert lines == ["lockrace: wide runs ALTER SYSTEM, which changes the whole server and not only lockrace's"
                         " sandbox: it runs only on the servers lockrace starts itself, not on a server given by DSN"]
        assert _auto_conf(pg_dsn) == before
    finally:
        if _auto_conf(pg_dsn) != before:  # (before the guard: the server's configuration was changed)
            with pg_dsn.connect() as conn:
                conn.execute("ALTER SYSTEM RESET work_mem")
                conn.execute("SELECT pg_reload_conf()")


def test_pg_spec_with_alter_system_is_refused_on_a_dsn(pg_dsn, tmp_path):
    before = _auto_conf(pg_dsn)
    spec = tmp_path / "wide.spec"
    spec.write_text("setup { CREATE TABLE t (id int); }\nsetup { ALTER SYSTEM SET work_mem = '7MB'; }\n"
                    "teardown { DROP TABLE t; }\nsession s1\nstep one { SELECT 1; }\npermutation one\n")
    try:
        out = run_lockrace(["run", str(spec), "--pg", pg_dsn.dsn()], lockrace_env(), 60)
        assert out.returncode == 2, out.stdout + out.stderr
        assert "lockrace: wide runs ALTER SYSTEM, which changes the whole server" in out.stderr, out.stderr
        assert _auto_conf(pg_dsn) == before
    finally:
        if _auto_conf(pg_dsn) != before:
            with pg_dsn.connect() as conn:
                conn.execute("ALTER SYSTEM RESET work_mem")
                conn.execute("SELECT pg_reload_conf()")


def test_mysql_scenario_with_set_global_is_refused_on_a_dsn(mysql_dsn, tmp_path):
    conn = mysql_dsn.connect()
    try:
        cur = conn.cursor()
        cur.execute("SELECT @@GLOBAL.max_connect_errors")
        before = cur.fetchone()[0]
        scenario = tmp_path / "wide.race"
        scenario.write_text(f"""title: a step changes a global
engines: mysql
setup:
    CREATE TABLE accounts (id int PRIMARY KEY) ENGINE=InnoDB;

A> SELECT 1;
A> SET /* x */ @@global.max_connect_errors = {int(before) + 7};
""")
        out = run_lockrace(["run", str(scenario), "--mysql", mysql_dsn.dsn()], lockrace_env(), 60)
        assert out.returncode == 2, out.stdout + out.stderr
        assert "lockrace: wide runs SET GLOBAL, which changes the whole server" in out.stderr, out.stderr
        cur.execute("SELECT @@GLOBAL.max_connect_errors")
        assert cur.fetchone()[0] == before
    finally:
        cur = conn.cursor()
        cur.execute(f"SET GLOBAL max_connect_errors = {int(before)}")
        conn.close()


def test_private_server_still_runs_them(tmp_path, server_tmp):
    """On lockrace's own server the same scenario runs (nothing of anyone else's is there)."""
    scenario = tmp_path / "wide.race"
    scenario.write_text(PG_SCENARIOS["step"])
    out = run_lockrace(["run", str(scenario)], lockrace_env(server_tmp), 120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Verified against PostgreSQL" in out.stdout, out.stdout


async def test_app_refuses_a_typed_server_wide_statement_on_a_dsn(pg_dsn, monkeypatch):
    """In the app on a DSN server: the statement is not sent, the panel keeps it, one
    sentence says why; an ordinary statement still runs."""
    from support.app import enter, finished, running_app

    monkeypatch.setenv("LOCKRACE_SANDBOX", "lockrace_app_wide")
    before = _auto_conf(pg_dsn)
    sql = "ALTER /* x */ SYSTEM SET work_mem='7MB';"
    try:
        async with running_app(engine="postgres", pg=pg_dsn.dsn()) as (app, pilot):
            try:
                await enter(pilot, app, "A", sql)
                await pilot.pause(0.3)
                assert app.panels["A"].status.statements == 0
                assert app.panels["A"].input.value == sql
                said = [n.message for n in app._notifications]
                assert any(m.startswith("This statement runs ALTER SYSTEM, which changes the whole server")
                           for m in said), said
                await enter(pilot, app, "A", "SELECT 1;")
                await finished(pilot, app, "A", 1)
            finally:
                await app._close_race()
                await app.pool.close()  # drops the app's sandbox
        assert _auto_conf(pg_dsn) == before
        with pg_dsn.connect() as conn:
            assert conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = 'lockrace_app_wide'").fetchone()[0] == 0
    finally:
        if _auto_conf(pg_dsn) != before:
            with pg_dsn.connect() as conn:
                conn.execute("ALTER SYSTEM RESET work_mem")
                conn.execute("SELECT pg_reload_conf()")
