"""Fault matrix 7c: another client's objects that depend on lockrace's sandbox.

On a server lockrace did not start, another client may build on the sandbox
while a run lives: a view over one of its tables, a foreign key to one, a
column or a function using one of its types.  Dropping the sandbox with
CASCADE (PostgreSQL) or DROP DATABASE (MariaDB) would take those objects with
it, or leave them broken.  lockrace then leaves the sandbox in place with one
sentence naming the object, and the sweep of a later run removes it only once
nothing outside it depends on it.

DSN servers: 127.0.0.1:5432 / 127.0.0.1:3306 where they answer, the tests'
private servers by socket otherwise (tests/support/dsn.py).
"""

from __future__ import annotations

import uuid

import pytest
from support.dsn import mysql_dsn, pg_dsn  # noqa: F401  (fixtures)
from support.scenarios import accounts

from lockrace.backends import open_backend
from lockrace.backends.sandbox import SandboxError
from lockrace.servers.target import mysql_target, pg_target


@pytest.fixture
def pg_db(pg_dsn):
    name = f"fault_dep_{uuid.uuid4().hex[:8]}"
    with pg_dsn.connect() as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield name
    finally:
        with pg_dsn.connect() as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _pg_schema_exists(pg_dsn, db: str, name: str) -> bool:
    with pg_dsn.connect(db) as conn:
        return bool(conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s", [name]).fetchone()[0])


SANDBOX_SETUP = [
    *accounts(100, 200),
    "CREATE TYPE mood AS ENUM ('calm', 'busy')",
]

# another client's object on the sandbox: (what it is, DDL with {s} for the sandbox, a check it still works)
FOREIGN = {
    "view": ("view public.rt_peek", "CREATE VIEW public.rt_peek AS SELECT id, balance FROM {s}.accounts",
             "SELECT count(*) FROM public.rt_peek"),
    "foreign key": ("rt_child_acct_fkey on public.rt_child",
                    "CREATE TABLE public.rt_child (id int PRIMARY KEY,"
                    " acct int CONSTRAINT rt_child_acct_fkey REFERENCES {s}.accounts)",
                    "SELECT count(*) FROM public.rt_child"),
    "column type": ("public.rt_col.m", "CREATE TABLE public.rt_col (m {s}.mood)", "SELECT count(*) FROM public.rt_col"),
    "function": ("function public.rt_fn({s}.mood)",
                 "CREATE FUNCTION public.rt_fn({s}.mood) RETURNS int LANGUAGE sql AS 'SELECT 1'",
                 "SELECT count(*) FROM pg_proc WHERE proname = 'rt_fn'"),
}


@pytest.mark.parametrize("kind", list(FOREIGN))
async def test_pg_drop_leaves_a_sandbox_another_client_builds_on(kind, pg_dsn, pg_db, monkeypatch):
    """Before: DROP SCHEMA ... CASCADE took the other client's view (foreign key,
    column, function) with it.  Now the drop says why the schema stays, the object
    is untouched, the next run's sweep leaves it too, and once the object is gone
    a later run removes the sandbox."""
    what, ddl, check = FOREIGN[kind]
    sandbox = f"lockrace_dep_{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("LOCKRACE_SANDBOX", sandbox)
    backend = await open_backend(pg_target(pg_dsn.dsn(pg_db)))
    try:
        await backend.run_admin(SANDBOX_SETUP)
        with pg_dsn.connect(pg_db) as other:
            other.execute(ddl.format(s=sandbox))
        with pytest.raises(SandboxError) as err:
            await backend.reset_sandbox()  # emptying it between scenarios would drop the object too
        assert f"could not empty the sandbox schema {sandbox}: " in str(err.value)
    finally:
        with pytest.raises(SandboxError) as err:
            await backend.drop_sandbox()
    line = str(err.value)
    assert "\n" not in line
    assert f"could not drop the sandbox schema {sandbox}: " in line, line
    assert what.format(s=sandbox) in line, line
    assert "the schema is left in place" in line, line
    with pg_dsn.connect(pg_db) as other:
        other.execute(check)  # the other client's object still works
        assert other.execute(f"SELECT balance FROM {sandbox}.accounts ORDER BY 1").fetchall() == [(100,), (200,)]
    assert _pg_schema_exists(pg_dsn, pg_db, sandbox)

    # a later run (another sandbox) sweeps the dead run's sandbox only once nothing depends on it
    monkeypatch.delenv("LOCKRACE_SANDBOX")
    later = await open_backend(pg_target(pg_dsn.dsn(pg_db)))
    await later.drop_sandbox()
    assert _pg_schema_exists(pg_dsn, pg_db, sandbox), "the sweep dropped a sandbox another client builds on"
    with pg_dsn.connect(pg_db) as other:
        other.execute(check)
        other.execute("DROP VIEW IF EXISTS public.rt_peek")
        other.execute("DROP TABLE IF EXISTS public.rt_child, public.rt_col")
        other.execute(f"DROP FUNCTION IF EXISTS public.rt_fn({sandbox}.mood)")
    later = await open_backend(pg_target(pg_dsn.dsn(pg_db)))
    await later.drop_sandbox()
    assert not _pg_schema_exists(pg_dsn, pg_db, sandbox)


async def test_pg_sandbox_own_objects_still_drop(pg_dsn, pg_db, monkeypatch):
    """The guard does not hold back a sandbox whose objects depend only on each other
    (views, foreign keys, types, sequences, defaults, partitions inside it)."""
    sandbox = f"lockrace_own_{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("LOCKRACE_SANDBOX", sandbox)
    backend = await open_backend(pg_target(pg_dsn.dsn(pg_db)))
    await backend.run_admin(SANDBOX_SETUP + [
        "CREATE VIEW peek AS SELECT * FROM accounts",
        "CREATE SEQUENCE ids",
        "CREATE TABLE child (id int DEFAULT nextval('ids') PRIMARY KEY, acct int REFERENCES accounts, m mood)",
        "CREATE TABLE parts (k int) PARTITION BY LIST (k)",
        "CREATE TABLE parts_1 PARTITION OF parts FOR VALUES IN (1)",
        "CREATE FUNCTION f(mood) RETURNS int LANGUAGE sql AS 'SELECT 1'",
    ])
    await backend.reset_sandbox()
    await backend.run_admin(SANDBOX_SETUP)
    await backend.drop_sandbox()
    assert not _pg_schema_exists(pg_dsn, pg_db, sandbox)


# ------------------------------------------------------------------ MariaDB


def _mysql(mysql_dsn, sql: str, args=()) -> list[tuple]:
    conn = mysql_dsn.connect()
    try:
        cur = conn.cursor()
        cur.execute(sql, args)
        return list(cur.fetchall()) if cur.description else []
    finally:
        conn.close()


def _mysql_db_exists(mysql_dsn, name: str) -> bool:
    return bool(_mysql(mysql_dsn, "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s", (name,)))


MYSQL_FOREIGN = {
    # DROP DATABASE would leave the view failing ("references invalid table(s)")
    "view": ("view {o}.rt_peek", "CREATE VIEW `{o}`.rt_peek AS SELECT id, balance FROM `{s}`.accounts",
             "SELECT COUNT(*) FROM `{o}`.rt_peek"),
    # DROP DATABASE stops at the parent table (1451) after dropping the others; emptying it with
    # FOREIGN_KEY_CHECKS = 0 leaves the foreign key pointing at nothing
    "foreign key": ("foreign key rt_child_fk of table {o}.rt_child",
                    "CREATE TABLE `{o}`.rt_child (id int PRIMARY KEY, acct int,"
                    " CONSTRAINT rt_child_fk FOREIGN KEY (acct) REFERENCES `{s}`.accounts (id)) ENGINE=InnoDB",
                    "INSERT INTO `{o}`.rt_child VALUES (1, 1)"),
    # the other client's inserts would fail from then on
    "trigger": ("trigger {o}.rt_audit",
                "CREATE TRIGGER `{o}`.rt_audit AFTER INSERT ON `{o}`.rt_log FOR EACH ROW"
                " UPDATE {s}.accounts SET balance = balance + 0 WHERE id = NEW.id",
                "INSERT INTO `{o}`.rt_log VALUES (1)"),
}


@pytest.mark.parametrize("kind", list(MYSQL_FOREIGN))
async def test_mysql_drop_leaves_a_sandbox_another_database_uses(kind, mysql_dsn, monkeypatch):
    what, ddl, check = MYSQL_FOREIGN[kind]
    token = uuid.uuid4().hex[:8]
    sandbox, other = f"lockrace_dep_{token}", f"fault_dep_{token}"
    monkeypatch.setenv("LOCKRACE_SANDBOX", sandbox)
    _mysql(mysql_dsn, f"CREATE DATABASE `{other}`")
    _mysql(mysql_dsn, f"CREATE TABLE `{other}`.rt_log (id int) ENGINE=InnoDB")
    try:
        backend = await open_backend(mysql_target(mysql_dsn.dsn()))
        try:
            await backend.run_admin(["CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL) ENGINE=InnoDB",
                                     "CREATE TABLE notes (id int PRIMARY KEY) ENGINE=InnoDB",
                                     "INSERT INTO accounts VALUES (1, 100), (2, 200)"])
            _mysql(mysql_dsn, ddl.format(s=sandbox, o=other))
            with pytest.raises(SandboxError) as err:
                await backend.reset_sandbox()
            assert f"could not empty the sandbox database {sandbox}: " in str(err.value)
        finally:
            with pytest.raises(SandboxError) as err:
                await backend.drop_sandbox()
        line = str(err.value)
        assert "\n" not in line
        assert f"could not drop the sandbox database {sandbox}: {what.format(o=other)}" in line, line
        assert "the database is left in place" in line, line
        _mysql(mysql_dsn, check.format(o=other))  # the other client's object still works
        assert _mysql(mysql_dsn, f"SELECT id FROM `{sandbox}`.notes") == []  # nothing of it was dropped
        assert _mysql(mysql_dsn, f"SELECT balance FROM `{sandbox}`.accounts ORDER BY 1") == [(100,), (200,)]

        # the next run's sweep leaves it too, and removes it once nothing uses it
        monkeypatch.delenv("LOCKRACE_SANDBOX")
        later = await open_backend(mysql_target(mysql_dsn.dsn()))
        await later.drop_sandbox()
        assert _mysql_db_exists(mysql_dsn, sandbox), "the sweep dropped a database another client uses"
        _mysql(mysql_dsn, f"DROP DATABASE `{other}`")
        later = await open_backend(mysql_target(mysql_dsn.dsn()))
        await later.drop_sandbox()
        assert not _mysql_db_exists(mysql_dsn, sandbox)
    finally:
        _mysql(mysql_dsn, f"DROP DATABASE IF EXISTS `{other}`")
        _mysql(mysql_dsn, f"DROP DATABASE IF EXISTS `{sandbox}`")
