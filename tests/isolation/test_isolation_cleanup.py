"""Isolation specs that end badly: one sentence on stderr, nothing left on the server.

A session that leaves an XA transaction prepared (MariaDB), a foreign client
connected to the spec's database, a spec that deletes its own catalog rows,
cluster engines (refused); and where a spec runs on a DSN server: a database
of lockrace's own, marked and locked while it lives.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from argparse import Namespace

import psycopg
import pymysql
import pytest
from psycopg.conninfo import make_conninfo

from lockrace.backends import open_backend
from lockrace.backends import sandbox as sandbox_mod
from lockrace.isolation.cli import run_specs
from lockrace.runtime.options import RunOptions, ServerChoice
from lockrace.scenario.spec_format import parse_spec, read_spec


def _args(**kw) -> RunOptions:
    """What ``lockrace run`` would pass: the DSN flags (pg, mysql, galera, standby) and the options."""
    flags = {name: kw.pop(name, None) for name in ("pg", "mysql", "galera", "standby")}
    base = dict(engine=None, expected=None, step_timeout=30.0, format="transcript")
    base.update(kw)
    return RunOptions(**base, servers=ServerChoice.from_flags(Namespace(**flags)))


def _spec(tmp_path, text: str, name: str = "t"):
    path = tmp_path / f"{name}.spec"
    path.write_text(text)
    return read_spec(path)


def _spec_databases(conninfo: str) -> list[str]:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        rows = conn.execute("SELECT datname FROM pg_database WHERE datname ~ '_iso[0-9]+$'").fetchall()
    return [r[0] for r in rows]


# ---------------------------------------------------------------- clusters: refused


@pytest.mark.parametrize("kw", [{"engine": "galera"}, {"engine": "postgres-standby"},
                                {"standby": "postgresql://a/x,postgresql://b/x"},
                                {"galera": "mysql://a,mysql://b"}])
async def test_cluster_engines_are_refused_in_one_sentence(capfd, kw):
    spec = parse_spec("session s\nstep x { SELECT 1; }\n")
    assert await run_specs([spec], _args(**kw)) == 2
    out, err = capfd.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("lockrace: ") and "one server" in err


# ---------------------------------------------------------------- MariaDB: XA PREPARE left pending

XA_SPEC = """\
# engines: mysql
setup { CREATE TABLE t (id int primary key, v int) ENGINE=InnoDB; INSERT INTO t VALUES (1, 1); }
teardown { DROP TABLE t; }
session s1
step x1 { XA START 'lrxa1'; UPDATE t SET v = 2 WHERE id = 1; XA END 'lrxa1'; XA PREPARE 'lrxa1'; }
session s2
step r2 { SELECT v FROM t WHERE id = 1; }
permutation x1 r2
"""


def _xa_recover(kwargs: dict) -> list:
    conn = pymysql.connect(**kwargs)
    try:
        cur = conn.cursor()
        cur.execute("XA RECOVER")
        return list(cur.fetchall())
    finally:
        conn.close()


async def test_mariadb_prepared_xa_is_rolled_back_at_once(tmp_path, mysql_server, capfd):
    """On a DSN server: the teardown does not wait for the prepared XA transaction's
    locks, nothing is left (XA RECOVER empty, no sandbox) and the run ends promptly."""
    kw = mysql_server.mysql_kwargs
    dsn = f"mysql://{kw.get('user', 'root')}@localhost/?unix_socket={kw['unix_socket']}"
    spec = _spec(tmp_path, XA_SPEC, "xa")
    t0 = time.monotonic()
    assert await run_specs([spec], _args(engine="mysql", mysql=dsn, step_timeout=10.0)) == 0
    assert time.monotonic() - t0 < 5
    out, err = capfd.readouterr()
    assert "teardown failed" not in out and "Traceback" not in err
    assert _xa_recover(kw) == []
    conn = pymysql.connect(**kw)
    try:
        cur = conn.cursor()
        cur.execute("SHOW DATABASES LIKE 'lockrace\\_%'")
        assert [r for r in cur.fetchall() if r[0] != "lockrace_isolation"] == []
    finally:
        conn.close()


async def test_mariadb_prepared_xa_on_own_server(tmp_path, mysql_backend):
    from support.isolation import run_to_bytes

    path = tmp_path / "xa.spec"
    path.write_text(XA_SPEC)
    t0 = time.monotonic()
    output, completed = await run_to_bytes(path, mysql_backend, step_timeout=10.0)
    assert time.monotonic() - t0 < 5
    assert completed and b"teardown failed" not in output
    assert _xa_recover(mysql_backend.target.mysql_kwargs) == []


# ---------------------------------------------------------------- PostgreSQL on a DSN: a database of its own


async def test_dsn_spec_runs_in_a_marked_database_of_its_own(tmp_path, pg_server, capfdbinary):
    """public schema, as pg_regress gives; marked as lockrace's and locked while the
    spec runs; dropped afterwards."""
    spec = _spec(tmp_path, """\
session s
step where { SELECT current_schema() AS schema, left(shobj_description(d.oid, 'pg_database'), 17) AS mark,
             (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND database = d.oid) AS locks
             FROM pg_database d WHERE datname = current_database(); }
""", "where")
    assert await run_specs([spec], _args(pg=pg_server.conninfo)) == 0
    out, _ = capfdbinary.readouterr()
    assert b"public|lockrace sandbox;|    1" in out, out
    assert _spec_databases(pg_server.conninfo) == []


async def test_spec_deleting_its_own_catalog_row_is_reported_and_cleaned(tmp_path, pg_server, capfd):
    """Its errors print as isolationtester prints them; the database goes whole."""
    spec = _spec(tmp_path, """\
setup { CREATE TABLE t (id int); }
teardown { DROP TABLE t; }
session s1
step d1 { DELETE FROM pg_class WHERE relname = 't' AND relnamespace = 'public'::regnamespace; }
step q1 { SELECT count(*) FROM t; }
""", "delrow")
    assert await run_specs([spec], _args(pg=pg_server.conninfo)) == 0
    out, err = capfd.readouterr()
    assert 'ERROR:  relation "t" does not exist\nteardown failed: ERROR:  table "t" does not exist\n' in out
    assert "Traceback" not in err
    assert _spec_databases(pg_server.conninfo) == []


async def test_foreign_client_in_the_spec_database_is_one_sentence(tmp_path, pg_server, capfd):
    """A client lockrace did not start holds a lock in the spec's database: the teardown
    fails as upstream's would, the database stays (one sentence says so and why),
    and the next run removes it once that client is gone."""
    spec = _spec(tmp_path, """\
setup { CREATE TABLE t (id int); }
teardown { DROP TABLE t; }
session s1
step wait { SELECT pg_sleep(1.5); }
""", "foreign")
    foreign: list[psycopg.AsyncConnection] = []

    async def intrude():
        for _ in range(200):
            names = _spec_databases(pg_server.conninfo)
            if names:
                conn = await psycopg.AsyncConnection.connect(make_conninfo(pg_server.conninfo, dbname=names[0]),
                                                             application_name="foreign")
                for _ in range(100):
                    try:
                        await conn.execute("LOCK TABLE t IN ACCESS SHARE MODE")
                        break
                    except psycopg.errors.UndefinedTable:
                        await conn.rollback()
                        await asyncio.sleep(0.02)
                foreign.append(conn)
                return
            await asyncio.sleep(0.02)

    task = asyncio.create_task(intrude())
    try:
        assert await run_specs([spec], _args(pg=pg_server.conninfo, step_timeout=1.0)) == 2
        out, err = capfd.readouterr()
        assert "teardown failed: ERROR:  canceling statement due to user request\n" in out
        assert "Traceback" not in err
        last = err.strip().splitlines()[-1]
        assert "another client is connected to it" in last and "foreign" in last and "next lockrace run" in last
        left = _spec_databases(pg_server.conninfo)
        assert len(left) == 1
    finally:
        await task
        for conn in foreign:
            await conn.close()
    # the next run on that server removes it (its owner is gone: the lock is free)
    spec2 = parse_spec("session s\nstep x { SELECT 1 AS one; }\n")
    assert await run_specs([spec2], _args(pg=pg_server.conninfo)) == 0
    assert _spec_databases(pg_server.conninfo) == []


async def test_a_live_runs_database_is_never_swept(pg_server):
    """A marked spec database whose lock is held (its run is alive) survives another run's sweep."""
    from lockrace.isolation.databases import PgPlace
    from lockrace.servers.target import sandbox_name

    def dsn_target():
        return dataclasses.replace(pg_server, origin="DSN", server=None, sandbox=sandbox_name())

    backends = [await open_backend(dsn_target()), await open_backend(dsn_target())]
    live = PgPlace(backends[0])
    try:
        await live.prepare("live")
        name = live.database
        other = PgPlace(backends[1])
        await other.prepare("other")
        assert other.mode == "database"
        await other.close()
        assert name in _spec_databases(pg_server.conninfo)
    finally:
        await live.close()
        for backend in backends:
            await backend.drop_sandbox()
    assert _spec_databases(pg_server.conninfo) == []


async def test_without_createdb_the_schema_sandbox_is_used(tmp_path, pg_server, capfdbinary):
    with psycopg.connect(pg_server.conninfo, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS lr_nocreatedb")
        conn.execute("CREATE ROLE lr_nocreatedb LOGIN")
        conn.execute("GRANT CREATE ON DATABASE postgres TO lr_nocreatedb")
    try:
        spec = _spec(tmp_path, "session s\nstep w { SELECT left(current_schema(), 9) AS schema; }\n", "w")
        dsn = make_conninfo(pg_server.conninfo, user="lr_nocreatedb")
        assert await run_specs([spec], _args(pg=dsn)) == 0
        out, _ = capfdbinary.readouterr()
        assert b"lockrace_" in out
        assert _spec_databases(pg_server.conninfo) == []
    finally:
        with psycopg.connect(pg_server.conninfo, autocommit=True) as conn:
            conn.execute("REVOKE CREATE ON DATABASE postgres FROM lr_nocreatedb")
            conn.execute("DROP ROLE lr_nocreatedb")


def test_marker_and_names_are_the_sandbox_scheme():
    from lockrace.isolation.databases import _SPEC_DB_NAME

    assert sandbox_mod.is_marked(sandbox_mod.marker("abcd"))
    assert _SPEC_DB_NAME.fullmatch("lockrace_1a2b3c4d_iso3")
    assert not _SPEC_DB_NAME.fullmatch("isolation_regression")
