"""The engine on a hot standby: a standby reader blocked by replayed locks is
reported blocked by the startup process, a query that holds up replay ends
as ``recovery_conflict`` against max_standby_streaming_delay."""

from __future__ import annotations

import asyncio

import psycopg

from lockrace.backends import open_backend
from lockrace.core.events import REPLAY_PROCESS, STANDBY_BUDGET, Budget
from lockrace.dialects.postgres import classify_postgres
from lockrace.engine.race import Race
from lockrace.servers.pg_standby import flush_wal, wait_replayed
from lockrace.servers.target import Target


def test_recovery_conflict_is_its_own_outcome():
    msg = "canceling statement due to conflict with recovery"
    assert classify_postgres("40001", msg, "SELECT 1") == "recovery_conflict"
    assert classify_postgres("40001", "terminating connection due to conflict with recovery", "SELECT 1",
                             connection_closed=True) == "recovery_conflict"
    # a serialization failure on a primary stays an error
    assert classify_postgres("40001", "could not serialize access due to concurrent update", "UPDATE t") == "error"


async def test_engine_names_replay_as_blocker_and_classifies_conflict(pg_standby_pair):
    pair = pg_standby_pair
    primary = await open_backend(Target("postgres", "embedded", conninfo=pair.primary_conninfo(), sandbox="stdby_engine"))
    await primary.reset_sandbox()
    await primary.run_admin(["CREATE TABLE accounts (id int PRIMARY KEY, balance int)",
                             "INSERT INTO accounts VALUES (1, 100)"])
    await asyncio.to_thread(wait_replayed, pair.primary_conninfo(), pair.standby_conninfo())
    standby = await open_backend(Target("postgres", "embedded", conninfo=pair.standby_conninfo(), sandbox="stdby_engine",
                                        hot_standby=True))
    assert standby.in_recovery and not primary.in_recovery
    on_primary = await Race(primary, ["A"]).open()
    on_standby = await Race(standby, ["B"]).open()
    try:
        assert Budget(STANDBY_BUDGET, 1000.0) in on_standby.sessions["B"].budgets
        assert all(b.name != STANDBY_BUDGET for b in on_primary.sessions["A"].budgets)

        await on_primary.run("A", "BEGIN")
        await on_primary.run("A", "LOCK TABLE accounts IN ACCESS EXCLUSIVE MODE")
        await asyncio.to_thread(wait_replayed, pair.primary_conninfo(), pair.standby_conninfo())
        stmt = on_standby.submit("B", "SELECT balance FROM accounts WHERE id = 1")
        assert await on_standby.wait_blocked_or_done(stmt, 5)
        assert stmt.result is None and stmt.blockers == (REPLAY_PROCESS,)
        assert stmt.lock.relation == "accounts" and stmt.lock.mode == "AccessShareLock"
        await on_primary.run("A", "COMMIT")
        await asyncio.wait_for(stmt.done.wait(), 5)
        assert stmt.result.outcome == "ok" and stmt.result.rows == [("100",)]
        assert stmt.result.blocked_by == (REPLAY_PROCESS,)

        stmt = on_standby.submit("B", "SELECT count(*), pg_sleep(5) FROM accounts")
        await asyncio.sleep(0.2)
        assert (await on_primary.run("A", "TRUNCATE accounts")).outcome == "ok"
        with psycopg.connect(pair.primary_conninfo(), autocommit=True) as conn:
            flush_wal(conn)
        await asyncio.wait_for(stmt.done.wait(), 6)
        res = stmt.result
        assert (res.outcome, res.code) == ("recovery_conflict", "40001")
        assert res.detail == "User was holding a relation lock for too long."
        assert res.budget == Budget(STANDBY_BUDGET, 1000.0)
        assert 900 < res.elapsed_ms < 4000
    finally:
        await on_primary.close()
        await on_standby.close()
        await primary.drop_sandbox()


async def test_replay_gate_waits_for_replay_and_reports_a_stuck_replay(pg_standby_pair):
    from lockrace.backends.pg_replication import ReplayGate

    pair = pg_standby_pair
    gate = await ReplayGate.connect(pair.primary_conninfo(), pair.standby_conninfo())
    primary = await psycopg.AsyncConnection.connect(pair.primary_conninfo(), autocommit=True)
    reader = await psycopg.AsyncConnection.connect(pair.standby_conninfo(), autocommit=True)
    try:
        await primary.execute("DROP TABLE IF EXISTS gate_t")
        await primary.execute("CREATE TABLE gate_t (id int)")
        state = await gate.sync()
        assert state.replayed and not state.waiting_for
        # an uncommitted ACCESS EXCLUSIVE lock reaches the standby with the sync's flush
        await primary.execute("BEGIN")
        await primary.execute("LOCK TABLE gate_t")
        assert (await gate.sync()).replayed
        await primary.execute("COMMIT")
        assert (await gate.sync()).replayed
        # a standby transaction holding a lock on gate_t: replay of TRUNCATE gets stuck behind it
        await reader.execute("BEGIN")
        await reader.execute("SELECT count(*) FROM gate_t")
        await primary.execute("TRUNCATE gate_t")
        state = await gate.sync()
        assert not state.replayed
        assert state.waiting_for == "lock" and state.relation == "gate_t"
        assert state.holders == (reader.info.backend_pid,)
        assert "waits for B" in state.describe(lambda pid: "B")
    finally:
        for conn in (reader, primary):
            await conn.close()
        # once the reader is gone, replay goes on
        assert (await gate.sync()).replayed
        await gate.close()


def _auto_conf(pair) -> list:
    with psycopg.connect(pair.standby_conninfo()) as conn:
        return conn.execute("SELECT name, setting FROM pg_file_settings WHERE sourcefile LIKE '%%auto.conf'"
                            " ORDER BY seqno").fetchall()


async def test_settings_changes_refused_on_a_pair_given_by_dsns(pg_standby_pair, monkeypatch):
    from lockrace.servers.cluster import cluster_target

    pair = pg_standby_pair
    monkeypatch.setenv("LOCKRACE_SANDBOX", "stdby_refuse")
    uris = ",".join(f"postgresql://postgres@/postgres?host={d}" for d in (pair.primary.socket_dir, pair.standby.socket_dir))
    cluster = cluster_target("postgres-standby", uris)
    assert cluster.origin == "DSN" and not cluster.owned
    backend = await open_backend(cluster)
    race = await Race(backend, ["A", "C"], placement={"A": "primary", "C": "standby"}).open()
    before = _auto_conf(pair)
    try:
        for session in ("A", "C"):
            res = await race.run(session, "ALTER SYSTEM SET hot_standby_feedback = on")
            assert res.outcome == "error"
            assert res.message.startswith("lockrace does not change the settings of a server it did not start")
        res = await race.run("C", "SELECT pg_reload_conf()")
        assert res.outcome == "error"
        assert _auto_conf(pair) == before  # nothing was written to postgresql.auto.conf
        assert (await race.run("C", "SELECT 1")).outcome == "ok"
    finally:
        await race.close()
        await backend.drop_sandbox()


async def test_cluster_race_says_when_replay_waits_for_a_standby_session(pg_standby_backend):
    from lockrace.core.events import ServerNote

    backend = pg_standby_backend
    await backend.reset_sandbox()
    await backend.run_admin(["CREATE TABLE accounts (id int PRIMARY KEY, balance int)",
                             "INSERT INTO accounts VALUES (1, 100)"])
    race = await Race(backend, ["A", "C"], placement={"A": "primary", "C": "standby"}).open()
    notes: list = []
    race.subscribe(lambda e: notes.append(e) if isinstance(e, ServerNote) else None)
    try:
        await race.run("C", "BEGIN")
        assert (await race.run("C", "SELECT count(*) FROM accounts")).rows == [("1",)]
        assert (await race.run("A", "TRUNCATE accounts")).outcome == "ok"
        said = [(n.session, n.node, n.text) for n in notes]
        assert said == [("A", "primary", "replay on the standby waits for C (a lock on accounts): PostgreSQL"
                                         " cancels that after max_standby_streaming_delay (1s)")]
        assert (await race.run("C", "ROLLBACK")).outcome == "ok"  # within the second: C lets replay go on
        assert (await race.run("C", "SELECT count(*) FROM accounts")).rows == [("0",)]
    finally:
        await race.close()


def test_blocked_by_replay_in_scenario_files():
    import pytest

    from lockrace.scenario.errors import ScenarioError
    from lockrace.scenario.text_format import parse_scenario

    text = ("engines: postgres-standby\nnodes: A=primary C=standby\n"
            "A> BEGIN;\nA> LOCK TABLE t;\nC> SELECT * FROM t;\n    blocked-by: {who}\n    completes-after: 4\nA> COMMIT;\n")
    sc = parse_scenario(text.format(who="replay"), path="t.race", name="t")
    assert [e.value for e in sc.steps[2].expectations if e.key == "blocked_by"] == ["replay"]
    with pytest.raises(ScenarioError, match="blocked-by: no session named X"):
        parse_scenario(text.format(who="X"), path="t.race", name="t")
