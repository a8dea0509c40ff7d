"""Verdicts checked against what the real server did (PostgreSQL and MariaDB)."""


import pytest

from lockrace.engine.race import Race
from lockrace.engine.runner import ScenarioRunner
from lockrace.scenario.text_format import read_scenario
from support import paths

DATA = paths.DATA / "verdicts"


async def _run(backend, name: str, step_timeout: float = 5):
    scenario = read_scenario(DATA / name)
    race = await Race(backend, scenario.session_names()).open()
    try:
        return await ScenarioRunner(race, scenario, step_timeout=step_timeout).run()
    finally:
        await race.close()


async def test_blocked_by_is_the_union_over_the_step(engine, pg_backend, mysql_backend):
    # D waits for B and C (both share-lock the row; PostgreSQL names one member
    # of the MultiXact at a time, B then C); B commits first, so the server's
    # last report names only C.  blocked-by: B, C must still hold.
    backend = pg_backend if engine == "postgres" else mysql_backend
    report = await _run(backend, "blocked-by-union.race")
    assert report.failures == []
    d = report.records[4]
    if engine == "postgres":
        assert d.result.blocked_by == ("C",)  # the last report: only C
    assert set(d.result.blockers_seen) == {"B", "C"}


async def test_skip_locked_counts_only_what_others_lock(engine, pg_backend, mysql_backend):
    # A's own uncommitted DELETE is not a skipped row (both engines); a row B is
    # still inserting is skipped by MariaDB's SKIP LOCKED (NOWAIT on it is refused)
    # and counted, while PostgreSQL does not see it at all.
    backend = pg_backend if engine == "postgres" else mysql_backend
    report = await _run(backend, "skip-own-and-inserting.race")
    assert report.failures == []
    assert report.records[2].result.skipped_rows == 0
    assert report.records[6].result.skipped_rows == (0 if engine == "postgres" else 1)


async def test_skip_locked_names_real_holders_and_foreign_ones(mysql_backend):
    # On a shared MariaDB: A holds row 1, a foreign client (a plain PyMySQL
    # connection, not a lockrace session) holds row 2 in the sandbox, another
    # foreign client holds a row in another database, and B only waits (for
    # A's row 1).  C's SKIP LOCKED passes over rows 1 and 2: holders are A and
    # the foreign client by thread, never B nor the client of the other database.
    import asyncio

    import pymysql

    backend = mysql_backend
    target = backend.target
    other_db = f"{backend.sandbox}_other"
    await backend.reset_sandbox()
    await backend.run_admin(["CREATE TABLE jobs (id int PRIMARY KEY, task varchar(20)) ENGINE=InnoDB",
                             "INSERT INTO jobs VALUES (1, 'a'), (2, 'b'), (3, 'c')",
                             f"CREATE DATABASE IF NOT EXISTS `{other_db}`",
                             f"CREATE TABLE IF NOT EXISTS `{other_db}`.t (id int PRIMARY KEY) ENGINE=InnoDB",
                             f"INSERT IGNORE INTO `{other_db}`.t VALUES (1)"])
    inside = pymysql.connect(**target.mysql_kwargs, database=backend.sandbox, autocommit=True)
    outside = pymysql.connect(**target.mysql_kwargs, database=other_db, autocommit=True)
    race = await Race(backend, ["A", "B", "C"]).open()
    try:
        inside.query("BEGIN")
        inside.query("SELECT * FROM jobs WHERE id = 2 FOR UPDATE")
        outside.query("BEGIN")
        outside.query("SELECT * FROM t WHERE id = 1 FOR UPDATE")
        assert (await race.run("A", "BEGIN")).outcome == "ok"
        assert (await race.run("A", "SELECT * FROM jobs WHERE id = 1 FOR UPDATE")).outcome == "ok"
        assert (await race.run("B", "BEGIN")).outcome == "ok"
        waiting = race.submit("B", "SELECT * FROM jobs WHERE id = 1 FOR UPDATE")
        assert await race.wait_blocked_or_done(waiting, 5) and waiting.result is None
        await asyncio.sleep(0.15)  # InnoDB's lock views refresh at most every 100 ms
        res = await race.run("C", "SELECT * FROM jobs ORDER BY id FOR UPDATE SKIP LOCKED")
        assert res.outcome == "skipped" and res.skipped_rows == 2
        assert res.skipped_from == ("A", f"another client (thread {inside.thread_id()})")
    finally:
        await race.close()
        inside.close()
        outside.close()
        await backend.run_admin([f"DROP DATABASE IF EXISTS `{other_db}`"])


@pytest.mark.mariadb_only
async def test_mariadb_zero_lock_wait_timeout_is_a_refusal(mysql_backend):
    # 1205 at once under innodb_lock_wait_timeout = 0 (SET SESSION or SET STATEMENT)
    # is a refusal; the budget shown is the one in force: SET STATEMENT's, and
    # lock_wait_timeout (not innodb's) for a metadata-lock wait.
    report = await _run(mysql_backend, "mariadb-zero-timeout.race")
    assert report.failures == []
    budgets = {rec.step.name: rec.result.budget for rec in report.records}
    assert budgets["4"].name == "innodb_lock_wait_timeout = 0"
    assert budgets["6"].name == "SET STATEMENT innodb_lock_wait_timeout = 0"
    assert (budgets["7"].name, budgets["7"].ms) == ("SET STATEMENT innodb_lock_wait_timeout", 1000)
    assert (budgets["9"].name, budgets["9"].ms) == ("lock_wait_timeout", 1000)


async def test_postgres_nowait_refusal_has_nowaits_budget(pg_backend):
    # FOR UPDATE NOWAIT under a session lock_timeout: the row refusal comes from
    # NOWAIT (its note said "budget lock_timeout 300 ms"); the same statement
    # waiting for the table lock is ended by lock_timeout.
    report = await _run(pg_backend, "pg-nowait-budget.race")
    assert report.failures == []
    budgets = {rec.step.name: rec.result.budget for rec in report.records}
    assert (budgets["4"].name, budgets["4"].ms) == ("NOWAIT", 0.0)
    assert (budgets["8"].name, budgets["8"].ms) == ("lock_timeout", 300.0)


async def _mdl_race(mysql_server, has_mdl_info: bool):
    from lockrace.backends import open_backend

    backend = await open_backend(mysql_server)
    # A server without the METADATA_LOCK_INFO plugin answers the same processlist: not
    # asking the plugin on this (private) server is what such a server leaves us with.
    backend.has_mdl_info = has_mdl_info
    await backend.reset_sandbox()
    await backend.run_admin(["CREATE TABLE t (id int PRIMARY KEY, v int) ENGINE=InnoDB", "INSERT INTO t VALUES (1, 0)"])
    return backend, await Race(backend, ["A", "B", "C"]).open()


@pytest.mark.mariadb_only
async def test_metadata_wait_names_the_holder_without_the_plugin(mysql_server):
    backend, race = await _mdl_race(mysql_server, has_mdl_info=False)
    try:
        await race.run("A", "BEGIN")
        await race.run("A", "SELECT * FROM t")  # A's open transaction holds a metadata lock on t
        await race.run("B", "SET SESSION lock_wait_timeout = 1")
        res = await race.run("B", "ALTER TABLE t ADD COLUMN w int")
        assert res.outcome == "timed_out"
        assert res.blockers_seen == ("A",) and res.lock.kind == "metadata" and res.lock.relation == "t"
        assert res.budget.name == "lock_wait_timeout"
        # while B's ALTER waits, C's plain read queues behind it: B is what C waits for
        # (as the plugin's view says), not A, whose shared lock C's read would share
        await race.run("B", "SET SESSION lock_wait_timeout = 2")
        alter = race.submit("B", "ALTER TABLE t ADD COLUMN w int")
        assert await race.wait_blocked_or_done(alter, 5) and alter.result is None
        await race.run("C", "SET SESSION lock_wait_timeout = 1")
        res = await race.run("C", "SELECT * FROM t WHERE id = 1")
        assert res.outcome == "timed_out" and res.lock.kind == "metadata", res
        assert res.blockers_seen == ("B",), res.blockers_seen
        await race.settled("B")
        await race.run("A", "COMMIT")
        # nobody in the race holds it (a client lockrace does not know): said plainly
        import pymysql

        other = pymysql.connect(**mysql_server.mysql_kwargs, database=backend.sandbox, autocommit=True)
        try:
            other.query("BEGIN")
            other.query("SELECT * FROM t")
            res = await race.run("B", "ALTER TABLE t ADD COLUMN w int")
            assert res.outcome == "timed_out"
            assert res.blockers_seen == ("an unnamed holder (the server does not tell who holds it:"
                                         " no METADATA_LOCK_INFO plugin)",)
        finally:
            other.close()
    finally:
        await race.close()
        await backend.reset_sandbox()


async def test_flush_tables_with_read_lock_names_its_holder(mysql_server):
    for plugin in (True, False):
        backend, race = await _mdl_race(mysql_server, has_mdl_info=plugin)
        try:
            assert (await race.run("A", "FLUSH TABLES WITH READ LOCK")).outcome == "ok"
            await race.run("B", "SET SESSION lock_wait_timeout = 1")
            res = await race.run("B", "UPDATE t SET v = 1 WHERE id = 1")
            assert res.outcome == "timed_out", res
            assert res.blockers_seen == ("A",), (plugin, res.blockers_seen, res.lock)
            assert res.budget.name == "lock_wait_timeout"
            await race.run("A", "UNLOCK TABLES")
        finally:
            await race.close()
            await backend.reset_sandbox()


async def test_mariadb_detects_a_wait_soon_after_a_preceding_statement(mysql_backend):
    # InnoDB's lock views refresh only when nobody read them for 100 ms: reading
    # them as SELECT 1 starts hid B's wait for ~100 ms.  Read once, 5 ms after the send.
    import asyncio

    from lockrace.core.events import StatementBlocked

    await mysql_backend.reset_sandbox()
    await mysql_backend.run_admin(["CREATE TABLE det (id int PRIMARY KEY, v int) ENGINE=InnoDB",
                                   "INSERT INTO det VALUES (1, 0)"])
    race = await Race(mysql_backend, ["A", "B"]).open()
    seen: dict[int, int] = {}
    race.subscribe(lambda e: isinstance(e, StatementBlocked) and seen.setdefault(e.stmt_id, e.t_ns))
    took = []
    try:
        await race.run("A", "BEGIN")
        await race.run("A", "UPDATE det SET v = 1 WHERE id = 1")
        for _ in range(5):
            await asyncio.sleep(0.15)  # the lock views idle, as between steps of a lesson
            await race.run("B", "SELECT 1")
            stmt = race.submit("B", "UPDATE det SET v = 2 WHERE id = 1")
            assert await race.wait_blocked_or_done(stmt, 5) and stmt.result is None
            took.append((seen[stmt.stmt_id] - stmt.started_ns) / 1e6)
            await race.cancel("B")
            await stmt.done.wait()
    finally:
        await race.close()
    took.sort()
    assert took[2] < 50, took  # the median; ~6 ms measured, ~100 ms before


async def test_new_expectations_fail_when_the_server_says_otherwise(pg_backend):
    report = await _run(pg_backend, "format-can-fail.race")
    text = "\n".join(report.failures)
    assert "expected lock: relation, got a wait on row (t id=1" in text
    assert "expected took: < budget, got took 10" in text and "(budget lock_timeout = 100 ms)" in text
    assert "expected notice: nothing was said, got no notice or warning" in text
    assert "expected rows-exactly: 2 | 0; 1 | 0, got rows 1 | 0; 2 | 0" in text
    assert "expected exactly one of steps 4, 5 to end deadlock, got step 4 timed_out, step 5 ok" in text
    assert len(report.failures) == 5


async def test_stepping_runs_each_engines_own_sql(mysql_backend):
    # The app steps a scenario one step at a time (Player): a step with per-engine
    # SQL runs the MariaDB variant there (LOCK IN SHARE MODE: with the PostgreSQL text
    # the share locks were not taken and D never waited).
    from lockrace.app.player import Player

    scenario = read_scenario(DATA / "blocked-by-union.race")
    race = await Race(mysql_backend, scenario.session_names()).open()
    try:
        player = Player(race, scenario, on_entry=lambda entry: None, step_timeout=5)
        await player.prepare()
        while await player.step():
            pass
    finally:
        await race.close()
    assert [r.failures for r in player.records] == [[]] * 7
    assert player.records[1].result.outcome == "ok"


async def test_transcript_shows_notices_and_warnings(pg_backend, mysql_backend):
    # what psql prints after the result (WARNING: ...), and the mysql client's SHOW WARNINGS
    from lockrace.render.transcript import entry_lines
    from lockrace.scenario.text_format import parse_scenario

    for backend, sql, said in (
        (pg_backend, "SET LOCAL lock_timeout = '100ms';", "WARNING:  SET LOCAL can only be used in transaction blocks"),
        (mysql_backend, "SET SESSION innodb_lock_wait_timeout = 2000000000;",
         "1 warning (SHOW WARNINGS lists it)"),
    ):
        scenario = parse_scenario(f"engines: postgres, mysql\nA> {sql}\n    notice: {said[-30:]}\n")
        lines: list[str] = []
        race = await Race(backend, ["A"]).open()
        try:
            runner = ScenarioRunner(race, scenario, step_timeout=5,
                                    on_entry=lambda e: lines.extend(entry_lines(e, backend.flavor)))
            report = await runner.run(prepare=False)
        finally:
            await race.close()
        assert report.failures == []
        assert said in lines


async def test_mariadb_never_reports_a_new_statement_blocked_from_an_older_look(mysql_backend):
    # Within 100 ms of a read InnoDB answers from the same snapshot (lockrace keeps that
    # answer instead of asking): it still shows B's finished wait.  B's next statement,
    # started after that look, must not be reported blocked on its strength.
    from lockrace.core.events import StatementBlocked

    await mysql_backend.reset_sandbox()
    await mysql_backend.run_admin(["CREATE TABLE det (id int PRIMARY KEY, v int) ENGINE=InnoDB",
                                   "INSERT INTO det VALUES (1, 0)"])
    race = await Race(mysql_backend, ["A", "B"]).open()
    blocked: list[int] = []
    race.subscribe(lambda e: isinstance(e, StatementBlocked) and blocked.append(e.stmt_id))
    try:
        await race.run("A", "BEGIN")
        await race.run("A", "UPDATE det SET v = 1 WHERE id = 1")
        wait = race.submit("B", "UPDATE det SET v = 2 WHERE id = 1")
        assert await race.wait_blocked_or_done(wait, 5) and wait.result is None
        await race.run("A", "COMMIT")
        await wait.done.wait()
        quiet = race.submit("B", "SELECT SLEEP(0.05)")  # runs 50 ms, waits for no lock
        await quiet.done.wait()
    finally:
        await race.close()
    assert wait.stmt_id in blocked and quiet.stmt_id not in blocked
