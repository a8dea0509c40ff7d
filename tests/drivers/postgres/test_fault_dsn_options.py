"""Fault matrix 7d: the user's libpq ``options`` (in the DSN, or PGOPTIONS) hold.

psql with ``options='-c role=reporting'`` works as that role, and with
``-c default_transaction_read_only=on`` it writes nothing; so must lockrace,
which adds options of its own (search_path, bounds) to every connection.
Before, those replaced the user's: lockrace ran as the login role and wrote.

The role is made by the test on the DSN server and dropped afterwards.
"""

from __future__ import annotations

import uuid

import pytest
from support.dsn import pg_dsn  # noqa: F401  (fixture)

from lockrace.backends import open_backend
from lockrace.backends.base import ConnectError
from lockrace.servers.target import pg_options, pg_target


@pytest.fixture
def role_db(pg_dsn):
    """(a database, a role that may create schemas in it), both the test's own."""
    token = uuid.uuid4().hex[:8]
    db, role = f"fault_opt_{token}", f"rt_reporting_{token}"
    with pg_dsn.connect() as conn:
        conn.execute(f"CREATE DATABASE {db}")
        conn.execute(f"CREATE ROLE {role} NOLOGIN")
        conn.execute(f"GRANT CREATE ON DATABASE {db} TO {role}")
    try:
        yield db, role
    finally:
        with pg_dsn.connect() as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
            conn.execute(f"DROP ROLE IF EXISTS {role}")
            assert conn.execute("SELECT count(*) FROM pg_roles WHERE rolname = %s", [role]).fetchone()[0] == 0


def test_pg_options_merge_as_libpq_chooses(monkeypatch):
    monkeypatch.setenv("PGOPTIONS", "-c role=from_env")
    # the DSN's options win over PGOPTIONS (libpq reads the variable only where the DSN has none)
    assert pg_options("host=h options='-c role=r'", "-c search_path=s") == "-c role=r -c search_path=s"
    assert pg_options("postgresql://u@h/db?options=-c%20role%3Dr", "-c a=1") == "-c role=r -c a=1"
    assert pg_options("host=h", "-c search_path=s", "-c b=2") == "-c role=from_env -c search_path=s -c b=2"
    assert pg_options("host=h options=''", "-c a=1") == "-c a=1"  # given, and empty: PGOPTIONS is not read
    monkeypatch.delenv("PGOPTIONS")
    assert pg_options("host=h", "-c a=1") == "-c a=1"
    assert pg_options("host=h") == ""


async def _who(backend) -> tuple:
    session = await backend.connect_session("A")
    try:
        res = await session.execute("SELECT current_user, current_setting('search_path'),"
                                    " current_setting('default_transaction_read_only')")
        return res.rows[0]
    finally:
        await session.close()


@pytest.mark.parametrize("via", ["dsn", "PGOPTIONS"])
async def test_pg_role_from_the_users_options_holds(via, pg_dsn, role_db, monkeypatch):
    db, role = role_db
    sandbox = f"lockrace_opt_{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("LOCKRACE_SANDBOX", sandbox)
    dsn = pg_dsn.dsn(db)
    if via == "dsn":
        dsn += f" options='-c role={role}'"
        monkeypatch.setenv("PGOPTIONS", "-c default_transaction_read_only=on")  # the DSN's options win
    else:
        monkeypatch.setenv("PGOPTIONS", f"-c role={role}")
    backend = await open_backend(pg_target(dsn))
    try:
        assert await _who(backend) == (role, sandbox, "off")
        with pg_dsn.connect(db) as conn:
            owner = conn.execute("SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = %s",
                                 [sandbox]).fetchone()
        assert owner == (role,), "the sandbox was created as another role than the DSN chose"
    finally:
        await backend.drop_sandbox()


@pytest.mark.parametrize("via", ["dsn", "PGOPTIONS"])
async def test_pg_read_only_from_the_users_options_holds(via, pg_dsn, role_db, monkeypatch):
    """A read-only DSN: lockrace cannot make its sandbox and says so; nothing is written."""
    db, _role = role_db
    sandbox = f"lockrace_ro_{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("LOCKRACE_SANDBOX", sandbox)
    dsn = pg_dsn.dsn(db)
    if via == "dsn":
        dsn += " options='-c default_transaction_read_only=on'"
    else:
        monkeypatch.setenv("PGOPTIONS", "-c default_transaction_read_only=on")
    with pytest.raises(ConnectError) as err:
        await open_backend(pg_target(dsn))
    assert "read-only transaction" in str(err.value), str(err.value)
    with pg_dsn.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s", [sandbox]).fetchone()[0] == 0


def test_pg_spec_runs_as_the_role_the_dsn_chooses(pg_dsn, role_db, tmp_path):
    """An isolation .spec's connections (their own options: search_path, pg_regress's
    settings) keep the DSN's role too."""
    from support.cli import lockrace_env, run_lockrace

    db, role = role_db
    spec = tmp_path / "who.spec"
    spec.write_text("setup { CREATE TABLE t (id int); }\nteardown { DROP TABLE t; }\nsession s1\n"
                    f"step who {{ SELECT current_user = '{role}' AS as_chosen_role; }}\npermutation who\n")
    out = run_lockrace(["run", str(spec), "--pg", pg_dsn.dsn(db) + f" options='-c role={role}'"], lockrace_env(), 60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "as_chosen_role\n--------------\nt" in out.stdout, out.stdout
