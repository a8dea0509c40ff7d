"""The servers the tests run on, as session fixtures: one real server per engine.

PostgreSQL: the embedded PostgreSQL 18 from the wheel (or LOCKRACE_PG_DSN).
MySQL family: a private server: the one LOCKRACE_MYSQLD names (MariaDB or
MySQL), else mariadbd/mysqld on PATH (or LOCKRACE_MYSQL_DSN).
Galera: a private 2-node cluster; standby: a private PostgreSQL primary + hot standby.
Database tests never skip in CI (CI=true): a missing server fails them.
tests/conftest.py loads this module as a plugin, so every test may name these fixtures.
"""

from __future__ import annotations

import os

import pytest

from lockrace.backends import open_backend
from lockrace.engine.race import Race
from lockrace.servers.process import ServerStartError
from lockrace.servers.target import mysql_target, pg_target

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

# what a test names to reach a server: a test that names none needs no server (tests/unit)
SERVER_FIXTURES = frozenset({
    "pg_server", "mysql_server", "galera_cluster", "galera_backend", "pg_backend", "mysql_backend",
    "backend", "make_race", "own_server", "own_server_module", "pg_standby_pair", "pg_standby_backend",
    "pg_dsn", "mysql_dsn", "server_tmp",
})


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
