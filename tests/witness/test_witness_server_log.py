"""What the server itself says each session's connection carried.

On a private server started for this module (never a user's server), every
statement is logged: PostgreSQL with ``log_statement = all`` (ALTER SYSTEM on that
private server; the log line's prefix carries the backend pid), MariaDB with the
general log into ``mysql.general_log`` (by thread id).  The built-in scenarios and
the hand-written witness cases run through lockrace; then, for every session, the
statements its backend received from its first step on must be exactly the SQL of
its steps (and of the scenario's own setup for that session), in order.

Allowed, and documented in the README, before a session's first statement: what
lockrace does as it connects (PostgreSQL: ``search_path`` and ``application_name``
in the startup packet, ``SET lc_messages``, one read of the session's wait budgets;
MariaDB: the connection's character set, one read of the session's wait budgets).
The log is read before the race closes: closing rolls back what a session left
open, as a client closing its connection would.
"""

from __future__ import annotations

import asyncio
import os
import re

import psycopg
import pymysql
import pytest

from lockrace.backends import open_backend
from lockrace.engine.race import Race
from lockrace.engine.runner import ScenarioRunner
from lockrace.engine.scheduler import Scheduler
from lockrace.scenario.library import builtin_paths, load
from lockrace.servers.target import mysql_target, pg_target
from test_witness_cases import MY_CASES, PG_CASES
from witness_harness import STEP_TIMEOUT, _scenario_of

SCENARIOS = {engine: [p for p in builtin_paths() if engine in load(p).engines] for engine in ("postgres", "mysql")}


@pytest.fixture(scope="module")
async def logged_pg():
    target = await asyncio.to_thread(pg_target, None)
    try:
        assert target.owned  # a private server, started here for this test
        with psycopg.connect(target.conninfo, autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET log_statement = 'all'")
            conn.execute("ALTER SYSTEM SET log_line_prefix = '%m [%p] '")
            conn.execute("SELECT pg_reload_conf()")
        yield target, await open_backend(target)
    finally:
        await asyncio.to_thread(target.stop)


@pytest.fixture(scope="module")
async def logged_mariadb():
    target = await asyncio.to_thread(mysql_target, None)
    try:
        assert target.owned
        conn = pymysql.connect(**target.mysql_kwargs, autocommit=True)
        try:
            cur = conn.cursor()
            cur.execute("SET GLOBAL log_output = 'TABLE', general_log = 1")
            cur.execute("SELECT @@version")
            if "mariadb" not in cur.fetchone()[0].lower():
                # MySQL logs a statement after parsing it, so one that does not parse is not
                # logged at all unless log_raw is on (then every statement as it arrived)
                cur.execute("SET GLOBAL log_raw = ON")
        finally:
            conn.close()
        yield target, await open_backend(target)
    finally:
        await asyncio.to_thread(target.stop)


# ------------------------------------------------------------ the logs

_PG_LINE = re.compile(r"^\d{4}-\d\d-\d\d [\d:.]+ \w+ \[(\d+)\] (\w+):  (.*)$")


def _pg_log_size(target) -> int:
    return os.fstat(target.server._log_fd).st_size


def pg_statements(target, since: int) -> dict[int, list[str]]:
    """pid -> the statements the log shows that backend received (from byte ``since``)."""
    fd = target.server._log_fd
    size = os.fstat(fd).st_size
    text = os.pread(fd, size - since, since).decode(errors="replace")
    out: dict[int, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        m = _PG_LINE.match(line)
        if m:
            current = None
            pid, level, message = int(m.group(1)), m.group(2), m.group(3)
            if level == "LOG" and message.startswith("statement: "):
                out.setdefault(pid, []).append(message[len("statement: "):])
                current = out[pid]
        elif current is not None and line.startswith("\t"):
            current[-1] += "\n" + line[1:]  # a statement of several lines goes on, tab-indented
    return out


def _mariadb_clear(target) -> None:
    conn = pymysql.connect(**target.mysql_kwargs, autocommit=True)
    try:
        cur = conn.cursor()
        cur.execute("SET SESSION sql_log_off = 1")
        cur.execute("TRUNCATE TABLE mysql.general_log")
    finally:
        conn.close()


def mariadb_statements(target) -> dict[int, list[str]]:
    """thread id -> what the general log shows that connection sent (queries as their
    text, any other command as ``<command>``)."""
    conn = pymysql.connect(**target.mysql_kwargs, autocommit=True)
    try:
        cur = conn.cursor()
        cur.execute("SET SESSION sql_log_off = 1")
        cur.execute("SELECT thread_id, command_type, CONVERT(argument USING utf8mb4) FROM mysql.general_log"
                    " ORDER BY event_time")
        out: dict[int, list[str]] = {}
        for thread, command, argument in cur.fetchall():
            out.setdefault(int(thread), []).append(argument if command == "Query" else f"<{command}>")
        return out
    finally:
        conn.close()


LOST = "\x00lost:"  # a typed statement the server cannot have received (its connection was gone)


def _norm(sql: str) -> str:
    return sql.strip().rstrip(";").strip()


# MariaDB's general log also shows the statements a stored function runs, as the
# server rewrote them (parameters as NAME_CONST): the body of the cases' claim()
ROUTINE_BODY = re.compile(r"^INSERT INTO audit VALUES \( NAME_CONST\('i',\d+\)\)$")
# a read that calls a volatile function, as a probe re-running the user's SQL would
_VOLATILE_READ = re.compile(r"^\s*SELECT\b.*\b(claim|nextval|rand|clock_timestamp|gen_random_uuid|random)\s*\(",
                            re.IGNORECASE | re.DOTALL)


def check_sessions(received: dict[int, list[str]], typed: dict[str, list[str]], idents: dict[str, int]) -> list[str]:
    """For every session: from its first typed statement on, exactly what it typed.
    On every other connection (lockrace's monitor, setup): no read that calls a
    volatile function (a user's SKIP LOCKED read run again)."""
    problems = []
    for ident, statements in received.items():
        if ident not in idents.values():
            problems += [f"backend {ident} (not a session) ran {s!r}" for s in statements if _VOLATILE_READ.match(s)]
    for name, statements in typed.items():
        if not statements:
            continue
        got = [_norm(s) for s in received.get(idents[name], []) if s != "<Quit>" and not ROUTINE_BODY.match(s)]
        want = [_norm(s) for s in statements if not s.startswith(LOST)]
        if want[0] not in got:
            problems.append(f"{name} (backend {idents[name]}): its first statement {want[0]!r} is not in the log;"
                            f" the log shows {got}")
            continue
        after = got[got.index(want[0]):]
        if after != want:
            problems.append(f"{name} (backend {idents[name]}): typed {want}\n    the server received {after}")
    return problems


# ------------------------------------------------------------ the runs

async def _run_scenario(backend, scenario, spec_rules: bool | None = None):
    """Run it as ``lockrace run`` does; return (typed SQL per session, backend per
    session) and leave the race open (closed by the caller after the log is read)."""
    race = await Race(backend, scenario.session_names()).open()
    sc = scenario.for_flavor(backend.flavor)
    if spec_rules:
        runner = Scheduler(race, scenario, step_timeout=STEP_TIMEOUT, spec_rules=True)
        runner.attach()
        await runner.prepare()
        for index, step in enumerate(runner.scenario.steps, start=1):
            await runner.step(step, index)
        await runner.finish()
        runner.detach()
        report = runner.report
    else:
        report = await ScenarioRunner(race, scenario, step_timeout=STEP_TIMEOUT).run()
    assert not report.setup_error, report.setup_error
    typed: dict[str, list[str]] = {name: list(sc.session(name).setup) for name in race.sessions}
    for rec in report.records:
        if "still busy" in rec.problem:
            continue  # not sent: a step for a busy session is not
        sql = rec.step.sql_for(backend.flavor) or rec.step.sql
        result = rec.result
        if result is not None and (result.outcome == "connection_lost" or result.severity == "FATAL"):
            # the server had ended the connection (idle_in_transaction_session_timeout): it
            # never received this statement
            sql = LOST + sql
        typed[rec.step.session].append(sql)
    idents = {name: s.ident for name, s in race.sessions.items()}
    return race, typed, idents


async def _check(engine, backend, target, scenario, spec_rules=None) -> list[str]:
    if engine == "postgres":
        since = _pg_log_size(target)
    else:
        await asyncio.to_thread(_mariadb_clear, target)
    race, typed, idents = await _run_scenario(backend, scenario, spec_rules)
    try:
        if engine == "postgres":
            await asyncio.sleep(0.05)  # the log is written by the server's logger as the statements arrive
            received = pg_statements(target, since)
        else:
            received = await asyncio.to_thread(mariadb_statements, target)
    finally:
        await race.close()
    await backend.run_admin(scenario.teardown_for(backend.flavor))
    assert set(idents.values()) <= set(received), "a session's backend is missing from the server's log"
    return check_sessions(received, typed, idents)


@pytest.mark.parametrize("path", SCENARIOS["postgres"], ids=[p.stem for p in SCENARIOS["postgres"]])
async def test_pg_sessions_carry_only_their_steps(path, logged_pg):
    target, backend = logged_pg
    assert await _check("postgres", backend, target, load(path)) == []


@pytest.mark.parametrize("path", SCENARIOS["mysql"], ids=[p.stem for p in SCENARIOS["mysql"]])
async def test_mariadb_sessions_carry_only_their_steps(path, logged_mariadb):
    target, backend = logged_mariadb
    assert await _check("mysql", backend, target, load(path)) == []


@pytest.mark.parametrize("case", PG_CASES, ids=[c.name for c in PG_CASES])
async def test_pg_witness_cases_carry_only_their_steps(case, logged_pg):
    target, backend = logged_pg
    assert await _check("postgres", backend, target, _scenario_of(case, "postgres"), spec_rules=True) == []


@pytest.mark.mariadb_only  # written with MariaDB's SQL (sequences, @@in_transaction, seq_1_to_N, NEXTVAL)
@pytest.mark.parametrize("case", MY_CASES, ids=[c.name for c in MY_CASES])
async def test_mariadb_witness_cases_carry_only_their_steps(case, logged_mariadb):
    target, backend = logged_mariadb
    assert await _check("mysql", backend, target, _scenario_of(case, "mysql"), spec_rules=True) == []


def test_the_log_readers_see_a_statement_of_several_lines():
    text = ("2026-01-01 10:00:00.000 UTC [41] LOG:  statement: SELECT 1\n"
            "2026-01-01 10:00:00.001 UTC [42] LOG:  statement: SELECT\n\t2;\n"
            "2026-01-01 10:00:00.002 UTC [42] ERROR:  boom\n")
    assert check_sessions({41: ["SET lc_messages = 'C'", "SELECT 1", "SELECT 9"]}, {"A": ["SELECT 1"]}, {"A": 41}) \
        != []
    assert check_sessions({41: ["SELECT x", "SELECT 1;"]}, {"A": ["SELECT 1"]}, {"A": 41}) == []
    lines = [_PG_LINE.match(line) for line in text.splitlines()]
    assert lines[0] and lines[1] and not lines[2] and lines[3]
