"""The scenario library beyond the seeds (issue 6), and the engine pieces it needed.

Every built-in is run on every engine it declares by test_builtin_scenarios.py;
here: the library is complete and readable, ``blocked-by: nobody`` can fail,
MariaDB's fractional ``WAIT`` is read the way the server reads it, a stale
wait report never lands on the next statement, and a read queued behind an
ALTER is reported blocked by the ALTER alone.
"""

from __future__ import annotations

import asyncio

import pytest

from lockrace.core.events import StatementBlocked
from lockrace.core.outcome import wait_seconds
from lockrace.dialects.mysql_family import classify_mysql
from lockrace.engine.race import Race
from lockrace.engine.runner import ScenarioRunner
from lockrace.scenario.errors import ScenarioError
from lockrace.scenario.library import builtin_paths, load, resolve
from lockrace.scenario.text_format import parse_scenario

ISSUE_6 = {
    "pg-deadlock": ["postgres"],
    "pg-statement-vs-lock-timeout": ["postgres"],
    "pg-idle-in-transaction-timeout": ["postgres"],
    "pg-nowait-table-lock": ["postgres"],
    "pg-advisory-locks": ["postgres"],
    "pg-recover-in-transaction": ["postgres"],
    "pg-skip-locked-worker-queue": ["postgres"],
    "pg-row-lock-modes": ["postgres"],
    "mysql-timeout-vs-deadlock": ["mysql"],
    "mysql-mariadb-wait-nowait": ["mysql"],
    "mysql-gap-locks": ["mysql"],
    "mysql-metadata-lock": ["mysql"],
    "mysql-skip-locked-secondary-index": ["mysql"],
}


def test_issue_6_scenarios_are_built_in_with_a_lesson():
    names = {p.stem for p in builtin_paths()}
    assert set(ISSUE_6) <= names
    for name, engines in ISSUE_6.items():
        sc = resolve(name)
        assert sc.engines == engines, name
        assert sc.title and len(sc.lesson.split()) >= 40, f"{name}: a lesson a newcomer can read"
        assert any(e.key in ("outcome", "code") for s in sc.steps for e in s.expectations), name


def test_mysql_scenarios_say_where_mysql8_was_not_verified():
    for name in ISSUE_6:
        sc = resolve(name)
        if "mysql" in sc.engines:
            assert "MySQL 8" in sc.lesson and "verif" in sc.lesson, name


# ------------------------------------------------------------ WAIT n on MariaDB

@pytest.mark.parametrize("sql,expected", [
    ("SELECT 1 FROM t FOR UPDATE WAIT 1", ("1", 1)),
    ("SELECT 1 FROM t FOR UPDATE WAIT 0", ("0", 0)),
    ("SELECT 1 FROM t FOR UPDATE WAIT 0.5", ("0.5", 0)),
    ("SELECT 1 FROM t FOR UPDATE WAIT .5", (".5", 0)),
    ("SELECT 1 FROM t FOR UPDATE WAIT 1.9", ("1.9", 1)),
    ("SELECT 1 FROM t FOR UPDATE WAIT 5e-1", ("5e-1", 5)),
    ("SELECT 'WAIT 3' FROM t", None),
    ("SELECT 1 FROM t FOR UPDATE NOWAIT", None),
])
def test_wait_seconds_keeps_only_whole_seconds(sql, expected):
    assert wait_seconds(sql) == expected


def test_fractional_wait_below_one_second_is_a_refusal():
    msg = "Lock wait timeout exceeded; try restarting transaction"
    assert classify_mysql(1205, msg, "SELECT id FROM a WHERE id = 1 FOR UPDATE WAIT 0.5") == "refused"
    assert classify_mysql(1205, msg, "SELECT id FROM a WHERE id = 1 FOR UPDATE WAIT 1.5") == "timed_out"


# ------------------------------------------------------------ blocked-by: nobody

_BLOCKED_BUT_SAYS_NOBODY = """\
title: a wait the scenario claims never happened
engines: postgres
setup:
    CREATE TABLE t (id int PRIMARY KEY);
    INSERT INTO t VALUES (1);
teardown:
    DROP TABLE IF EXISTS t;

A> BEGIN;
A> SELECT id FROM t WHERE id = 1 FOR UPDATE;
B> SET lock_timeout = '300ms';
B> SELECT id FROM t WHERE id = 1 FOR UPDATE;
    expect: timed_out
    blocked-by: nobody
A> COMMIT;
B> SELECT id FROM t WHERE id = 1 FOR UPDATE;
    blocked-by: nobody
"""


def test_blocked_by_nobody_is_not_a_session_name():
    sc = parse_scenario(_BLOCKED_BUT_SAYS_NOBODY)
    assert sc.step("4").expectations[-1].value == "nobody"
    with pytest.raises(ScenarioError, match="no session named nobdy"):
        parse_scenario(_BLOCKED_BUT_SAYS_NOBODY.replace("blocked-by: nobody\nA>", "blocked-by: nobdy\nA>"))


async def test_blocked_by_nobody_fails_when_the_server_reports_a_wait(pg_backend):
    sc = parse_scenario(_BLOCKED_BUT_SAYS_NOBODY)
    race = await Race(pg_backend, sc.session_names()).open()
    try:
        runner = ScenarioRunner(race, sc, step_timeout=10)
        report = await runner.run()
        await runner.teardown()
    finally:
        await race.close()
    assert len(report.failures) == 1
    assert "step 4" in report.failures[0] and "expected blocked-by: nobody, got blocked by A" in report.failures[0]


# ------------------------------------------------------------ stale wait reports

async def test_a_wait_report_never_lands_on_the_next_statement(pg_backend, make_race):
    """B's lock wait ends by lock_timeout while a monitor poll is in flight;
    B's next statement (which cannot wait) must never be reported blocked.
    The server's answers are real; they only arrive 30 ms late, as from a
    loaded machine, so that an answer about the old wait lands after B
    moved on.  (Seen in the wild on pg-advisory-locks without the delay.)"""
    race = await make_race(pg_backend, ("A", "B"))
    real_waits = race.monitor.waits

    async def late_waits(idents):
        reports = await real_waits(idents)
        await asyncio.sleep(0.03)
        return reports

    race.monitor.waits = late_waits
    await race.run("A", "CREATE TABLE t (id int PRIMARY KEY)")
    await race.run("A", "INSERT INTO t VALUES (1)")
    await race.run("A", "BEGIN")
    await race.run("A", "SELECT pg_advisory_lock(7)")
    await race.run("B", "SET lock_timeout = '50ms'")
    wrong: list[str] = []
    quick_ids: set[int] = set()

    def on_event(event):
        if isinstance(event, StatementBlocked) and event.stmt_id in quick_ids:
            wrong.append(f"statement {event.stmt_id} reported blocked")

    race.subscribe(on_event)
    for _ in range(8):
        waited = await race.run("B", "SELECT pg_advisory_lock(7)")
        assert waited.outcome == "timed_out"
        quick = race.submit("B", "SELECT pg_sleep(0.1)")  # runs a while, never waits for a lock
        quick_ids.add(quick.stmt_id)
        await quick.done.wait()
        assert quick.result.outcome == "ok"
        assert not quick.ever_blocked
    assert wrong == []
    await race.run("A", "ROLLBACK")
    await race.run("A", "SELECT pg_advisory_unlock_all()")


# ------------------------------------------------------------ metadata locks

async def test_read_queued_behind_alter_is_blocked_by_the_alter_only(mysql_backend):
    if not mysql_backend.has_mdl_info and mysql_backend.flavor == "mariadb":
        pytest.skip("METADATA_LOCK_INFO plugin not loaded on this MariaDB")
    sc = load(next(p for p in builtin_paths() if p.stem == "mysql-metadata-lock"))
    race = await Race(mysql_backend, sc.session_names()).open()
    try:
        runner = ScenarioRunner(race, sc, step_timeout=10)
        report = await runner.run()
        await runner.teardown()
    finally:
        await race.close()
    assert report.failures == []
    by_sql = {r.step.sql.split(";")[0]: r for r in report.records}
    alter = next(r for r in report.records if r.step.sql.startswith("ALTER") and r.result.outcome == "timed_out")
    read = by_sql["SELECT balance FROM accounts WHERE id = 2"]
    assert alter.blockers == ("A",)
    assert read.blockers == ("B",)


# ------------------------------------------------------------ budgets shown in transcripts

def test_budget_of_lock_table_nowait_and_fractional_wait():
    from lockrace.core.events import Budget
    from lockrace.engine.session import Session

    pg = Session("B", None, "postgres")
    pg.budgets = (Budget("lock_timeout", 100.0), Budget("statement_timeout", 0.0))
    assert pg.budget_for("LOCK TABLE accounts IN ROW SHARE MODE NOWAIT") == Budget("NOWAIT", 0.0)
    # FOR UPDATE NOWAIT refuses row locks only; its table lock still waits up to lock_timeout
    assert pg.budget_for("SELECT id FROM accounts FOR UPDATE NOWAIT") == Budget("lock_timeout", 100.0)
    maria = Session("B", None, "mariadb")
    assert maria.budget_for("SELECT id FROM a FOR UPDATE WAIT 0.5") == Budget("WAIT 0.5 (read as 0)", 0.0)
    assert maria.budget_for("SELECT id FROM a FOR UPDATE WAIT 2") == Budget("WAIT 2", 2000.0)


def test_a_plain_statements_budget_follows_the_sessions_budgets():
    """A statement naming no budget of its own gets the session's, worked out once per
    set of budgets: a changed set is seen by the next statement, and a DDL statement
    (or a metadata-lock wait) gets lock_wait_timeout where a row read gets innodb's."""
    from lockrace.core.events import Budget
    from lockrace.engine.session import Session

    maria = Session("B", None, "mariadb")
    assert maria.budget_for("SELECT 1") is None
    maria.budgets = (Budget("innodb_lock_wait_timeout", 50_000.0), Budget("lock_wait_timeout", 86_400_000.0),
                     Budget("max_statement_time", 0.0))
    row = "SELECT id FROM a WHERE id = 1 FOR UPDATE"
    assert maria.budget_for(row) == Budget("innodb_lock_wait_timeout", 50_000.0)
    assert maria.budget_for("ALTER TABLE a ADD COLUMN c INT") == Budget("lock_wait_timeout", 86_400_000.0)
    assert maria.budget_for(row, metadata=True) == Budget("lock_wait_timeout", 86_400_000.0)
    maria.budgets = (Budget("innodb_lock_wait_timeout", 1_000.0), Budget("lock_wait_timeout", 86_400_000.0),
                     Budget("max_statement_time", 300.0))
    assert maria.budget_for(row) == Budget("max_statement_time", 300.0)
    maria.budgets = (Budget("innodb_lock_wait_timeout", 0.0), Budget("lock_wait_timeout", 86_400_000.0),
                     Budget("max_statement_time", 0.0))
    assert maria.budget_for(row) == Budget("innodb_lock_wait_timeout = 0", 0.0)
    # a budget named in the statement itself is read from its text, whatever the session's
    assert maria.budget_for("SET STATEMENT innodb_lock_wait_timeout = 3 FOR " + row) == \
        Budget("SET STATEMENT innodb_lock_wait_timeout", 3000.0)
    pg = Session("B", None, "postgres")
    pg.budgets = (Budget("lock_timeout", 100.0), Budget("statement_timeout", 0.0))
    assert pg.budget_for("UPDATE a SET v = 1") == Budget("lock_timeout", 100.0)
    pg.budgets = (Budget("lock_timeout", 0.0), Budget("statement_timeout", 0.0))
    assert pg.budget_for("UPDATE a SET v = 1") is None
