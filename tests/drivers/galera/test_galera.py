"""MariaDB Galera, live: a private 2-node cluster (started once per test
session by the ``galera_cluster`` fixture; in CI a cluster that cannot start
fails these tests), sessions on both nodes, the engine's per-node blocked
detection and the certification_conflict outcome told apart from an InnoDB
deadlock by the nodes' own wsrep counters.

The built-in galera-* scenarios run in test_builtin_scenarios.py; here are
the engine-level checks and the clean start/stop of a cluster.
"""

from __future__ import annotations

import asyncio
import signal
import time

import pymysql
import pytest
from support.cli import LiveRun, lockrace_env, processes_mentioning, run_lockrace, server_tmp  # noqa: F401
from support.scenarios import accounts

from lockrace.backends.galera import read_counters
from lockrace.engine.runner import ScenarioRunner
from lockrace.scenario.library import resolve

SETUP = accounts(100, 100)


async def _race(make_race, galera_backend, placement):
    race = await make_race(galera_backend, list(placement), placement=placement)
    await galera_backend.run_admin(SETUP)
    return race


def _node_sql(cluster, node: str, sql: str):
    conn = pymysql.connect(**cluster.nodes[node].mysql_kwargs, database=None, autocommit=True)
    try:
        cur = conn.cursor()
        cur.execute(sql)
        return cur.fetchall()
    finally:
        conn.close()


def test_cluster_has_two_synced_nodes(galera_cluster):
    for node in ("node1", "node2"):
        status = dict(_node_sql(galera_cluster, node, "SHOW GLOBAL STATUS WHERE Variable_name IN "
                                "('wsrep_cluster_size', 'wsrep_local_state_comment', 'wsrep_ready')"))
        assert status == {"wsrep_cluster_size": "2", "wsrep_local_state_comment": "Synced", "wsrep_ready": "ON"}


async def test_sessions_sit_on_their_nodes_and_events_carry_the_node(galera_backend, make_race, galera_cluster):
    race = await _race(make_race, galera_backend, {"A": "node1", "C": "node2"})
    events = []
    race.subscribe(events.append)
    a = await race.run("A", "SELECT @@wsrep_node_name")
    c = await race.run("C", "SELECT @@wsrep_node_name")
    assert (a.rows, c.rows) == ([("node1",)], [("node2",)])
    assert (a.node, c.node) == ("node1", "node2")
    assert {(e.session, e.node) for e in events} == {("A", "node1"), ("C", "node2")}
    assert set(race.monitors) == {"node1", "node2"}


async def test_two_nodes_same_row_neither_blocks_second_commit_is_a_certification_conflict(
        galera_backend, make_race, galera_cluster):
    race = await _race(make_race, galera_backend, {"A": "node1", "C": "node2"})
    before = await read_counters(race.monitors["node2"])
    for name, sql in (("A", "BEGIN"), ("A", "UPDATE accounts SET balance = 1 WHERE id = 1"),
                      ("C", "BEGIN"), ("C", "UPDATE accounts SET balance = 2 WHERE id = 1"), ("A", "COMMIT")):
        res = await asyncio.wait_for(race.run(name, sql), 10)  # none of them waits
        assert res.outcome == "ok", (sql, res.message)
    res = await race.run("C", "COMMIT")
    assert (res.outcome, res.code, res.node) == ("certification_conflict", "1213", "node2")
    assert res.message == "Deadlock found when trying to get lock; try restarting transaction"
    assert res.conflict in ("certification failure", "brute-force abort")
    assert res.blocked_by == () and res.waited_ns == 0
    after = await read_counters(race.monitors["node2"])
    assert sum(after.values()) > sum(before.values())  # what the classification rests on
    assert race.sessions["C"].txn == "idle"


async def test_an_innodb_deadlock_on_one_node_stays_a_deadlock(galera_backend, make_race):
    """The negative side of the classifier: a real lock cycle on node1 moves no wsrep counter."""
    race = await _race(make_race, galera_backend, {"A": "node1", "B": "node1"})
    for name, sql in (("A", "BEGIN"), ("B", "BEGIN"), ("A", "UPDATE accounts SET balance = 1 WHERE id = 1"),
                      ("B", "UPDATE accounts SET balance = 2 WHERE id = 2")):
        assert (await race.run(name, sql)).outcome == "ok"
    a = race.submit("A", "UPDATE accounts SET balance = 1 WHERE id = 2")
    assert await race.wait_blocked_or_done(a, 10)
    assert a.blockers == ("B",)
    b = await race.run("B", "UPDATE accounts SET balance = 2 WHERE id = 1")
    await asyncio.wait_for(a.done.wait(), 10)
    results = sorted([a.result.outcome, b.outcome])
    assert results == ["deadlock", "ok"], (a.result.message, b.message)


async def test_same_thread_ids_on_two_nodes_are_told_apart(galera_backend, make_race):
    """Blocked detection asks the waiter's own node and names blockers on that node."""
    race = await _race(make_race, galera_backend, {"A": "node1", "B": "node1", "C": "node2", "D": "node2"})
    assert race.name_of(race.sessions["A"].ident, "node1") == "A"
    assert race.name_of(race.sessions["C"].ident, "node2") == "C"
    assert race.name_of(race.sessions["A"].ident, "node2") != "A"  # that id on node2 is not A
    await race.run("C", "BEGIN")
    await race.run("C", "UPDATE accounts SET balance = 3 WHERE id = 1")
    d = race.submit("D", "UPDATE accounts SET balance = 4 WHERE id = 1")
    assert await race.wait_blocked_or_done(d, 10)
    assert d.blockers == ("C",) and d.result is None
    await race.run("C", "ROLLBACK")
    await asyncio.wait_for(d.done.wait(), 10)
    assert d.result.outcome == "ok" and d.result.blocked_by == ("C",)


def test_run_galera_scenario_on_cluster_dsns(galera_cluster, tmp_path):
    """--galera DSN1,DSN2: the same scenario on a cluster lockrace did not start."""
    dsns = ",".join(f"mysql://root@localhost/?unix_socket={t.mysql_kwargs['unix_socket']}"
                    for t in galera_cluster.nodes.values())
    res = run_lockrace(["run", "galera-certification-conflict", "--galera", dsns],
                       lockrace_env(LOCKRACE_SANDBOX="lockrace_gdsn"), timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "-- nodes: A@node1, C@node2" in res.stdout
    assert "certification conflict (" in res.stdout
    assert "Verified against MariaDB Galera 10." in res.stdout and "(DSN)" in res.stdout
    left = _node_sql(galera_cluster, "node2", "SELECT count(*) FROM information_schema.SCHEMATA"
                                              " WHERE SCHEMA_NAME = 'lockrace_gdsn'")
    assert left[0][0] == 0  # the sandbox was dropped (on both nodes: DDL replicates)


def test_bad_cluster_dsns_are_one_clear_line():
    res = run_lockrace(["run", "galera-certification-conflict", "--galera", "mysql://root:pw@127.0.0.1:1"],
                       lockrace_env(), timeout=60)
    assert res.returncode == 2
    assert res.stderr.startswith("lockrace: --galera needs 2 DSNs") and "pw" not in res.stderr


BLOCKS = """title: B waits on node1 while C sleeps on node2
engines: galera
nodes: A=node1 B=node1 C=node2
setup:
    CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL);
    INSERT INTO accounts VALUES (1, 100);

A> BEGIN;
A> UPDATE accounts SET balance = 1 WHERE id = 1;
B> UPDATE accounts SET balance = 2 WHERE id = 1;
    completes-after: 5
C> SELECT SLEEP(60);
A> COMMIT;
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM])
def test_private_cluster_started_and_stopped_by_run_leaves_nothing(sig, tmp_path, server_tmp):
    """lockrace run on a private cluster, interrupted mid-race: both nodes stop, no
    process (mariadbd, rsync) and no temp dir is left; the start-up time is printed."""
    scenario = tmp_path / "blocks.race"
    scenario.write_text(BLOCKS)
    live = LiveRun(["run", str(scenario), "--step-timeout", "120"], lockrace_env(server_tmp))
    try:
        assert live.wait_for_line("C> SELECT SLEEP(60);", 120), live.stdout + live.stderr
        assert "-- B is blocked by A" in live.stdout
        assert len([p for p in server_tmp.iterdir() if p.name.startswith("lockrace-galera-")]) == 2
        assert len(processes_mentioning(str(server_tmp))) >= 2
        time.sleep(0.2)
        live.proc.send_signal(sig)
        code = live.finish(60)
    finally:
        live.kill()
    assert code == 130, (code, live.stdout, live.stderr)
    assert "Traceback" not in live.stderr
    assert processes_mentioning(str(server_tmp)) == [], "cluster processes left behind"
    assert sorted(p.name for p in server_tmp.iterdir()) == [], "cluster temp dirs left behind"


async def test_builtin_galera_scenarios_report_the_node_counters(galera_backend, make_race):
    """The brute-force abort scenario: A's 1213 comes with wsrep_local_bf_aborts grown on node1."""
    sc = resolve("galera-brute-force-abort")
    race = await make_race(galera_backend, sc.session_names(), placement=sc.placement("galera"))
    before = await read_counters(race.monitors["node1"])
    report = await ScenarioRunner(race, sc, step_timeout=15).run()
    assert report.failures == []
    after = await read_counters(race.monitors["node1"])
    assert after["wsrep_local_bf_aborts"] == before["wsrep_local_bf_aborts"] + 1
    victim = [r for r in report.records if r.result and r.result.outcome == "certification_conflict"]
    assert [(r.step.session, r.result.conflict, r.result.node) for r in victim] == [("A", "brute-force abort", "node1")]


def test_no_galera_provider_is_one_clear_line(tmp_path):
    """A machine without galera-4 is simulated by pointing LOCKRACE_GALERA_PROVIDER at a missing file
    (the real provider cannot be uninstalled for a test)."""
    missing = tmp_path / "libgalera_smm.so"
    res = run_lockrace(["run", "galera-certification-conflict"],
                       lockrace_env(LOCKRACE_GALERA_PROVIDER=str(missing)), timeout=60)
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stderr.strip().splitlines() == [
        f"lockrace: LOCKRACE_GALERA_PROVIDER={missing}: no such file (the Galera provider, libgalera_smm.so)"]


async def test_causal_wait_is_reported_blocked_with_its_own_budget(galera_backend, make_race, galera_cluster):
    """galera-sync-wait: the wsrep_sync_wait read is reported waiting (not a lock view row),
    on D's FLUSH TABLES WITH READ LOCK, bounded by repl.causal_read_timeout."""
    sc = resolve("galera-sync-wait")
    race = await make_race(galera_backend, sc.session_names(), placement=sc.placement("galera"))
    report = await ScenarioRunner(race, sc, step_timeout=15).run()
    assert report.failures == []
    waited = [r for r in report.records if r.was_blocked]
    assert [r.step.session for r in waited] == ["C"]
    res = waited[0].result
    assert res.lock.kind == "replication" and "node2 to catch up" in res.lock.describe()
    options = _node_sql(galera_cluster, "node2", "SELECT @@wsrep_provider_options")[0][0]
    assert "repl.causal_read_timeout = PT5S" in options  # lockrace's own cluster keeps it short
    assert (res.budget.name, res.budget.ms) == ("repl.causal_read_timeout", 5000.0)
    assert res.rows == [("110",)]


@pytest.fixture
def own_galera():
    """A cluster of this test's own, which it may damage (never the session-wide one)."""
    from support.servers import _unavailable

    from lockrace.servers.choose import target_for
    from lockrace.servers.process import ServerStartError

    try:
        cluster = target_for("galera", None)
    except ServerStartError as exc:
        _unavailable("MariaDB Galera", exc)
    yield cluster
    cluster.stop()
    assert all(t.server.dir is None for t in cluster.nodes.values())


async def test_a_node_dying_closes_only_the_sessions_on_it(own_galera):
    from lockrace.backends import open_backend
    from lockrace.engine.race import Race

    backend = await open_backend(own_galera)
    race = await Race(backend, ["A", "B", "C", "D"]).open()  # default: A, B on node1; C, D on node2
    try:
        assert {n: s.node for n, s in race.sessions.items()} == {"A": "node1", "B": "node1", "C": "node2", "D": "node2"}
        await race.run("C", "BEGIN")
        own_galera.nodes["node2"].server.kill()  # SIGKILL, like a crash
        res = await race.run("C", "SELECT 1")
        assert res.outcome == "connection_lost" and res.node == "node2"
        deadline = time.monotonic() + 10
        while race.sessions["D"].txn != "closed" and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert race.sessions["D"].txn == "closed"  # found out by probing node2, not by running something
        assert race.sessions["A"].txn == "idle" and race.sessions["B"].txn == "idle"
        a = await race.run("A", "SELECT @@wsrep_node_name")
        assert a.outcome != "connection_lost" and a.node == "node1"
    finally:
        await race.close()


async def test_causal_wait_nobody_releases_times_out_at_its_budget(galera_backend, make_race):
    """KILL QUERY does not end a causal wait; repl.causal_read_timeout does (5 s on lockrace's cluster)."""
    race = await _race(make_race, galera_backend, {"A": "node1", "C": "node2", "D": "node2"})
    assert (await race.run("D", "FLUSH TABLES WITH READ LOCK")).outcome == "ok"
    try:
        assert (await race.run("A", "UPDATE accounts SET balance = 7 WHERE id = 1")).outcome == "ok"
        await race.run("C", "SET SESSION wsrep_sync_wait = 1")
        c = race.submit("C", "SELECT balance FROM accounts WHERE id = 1")
        assert await race.wait_blocked_or_done(c, 10) and c.result is None
        assert c.blockers == ("D",)
        await asyncio.wait_for(c.done.wait(), 15)
        res = c.result
        assert (res.outcome, res.code) == ("timed_out", "1205"), res.message
        assert (res.budget.name, res.budget.ms) == ("repl.causal_read_timeout", 5000.0)
        assert 4.9e9 < res.elapsed_ns < 8e9
    finally:
        await race.run("D", "UNLOCK TABLES")


def test_galera_dsns_of_a_plain_mariadb_are_refused_before_anything_is_created(mysql_server):
    """--galera pointed at a MariaDB without wsrep: one clear line, no sandbox left on it."""
    sock = mysql_server.mysql_kwargs["unix_socket"]
    dsn = f"mysql://root@localhost/?unix_socket={sock}"
    res = run_lockrace(["run", "galera-certification-conflict", "--galera", f"{dsn},{dsn}"],
                       lockrace_env(LOCKRACE_SANDBOX="lockrace_notgalera"), timeout=60)
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stderr.strip().splitlines() == [
        f"lockrace: node1 at mysql://root@{sock} is not a Galera node (wsrep_on is OFF)"]
    conn = pymysql.connect(**mysql_server.mysql_kwargs)
    try:
        cur = conn.cursor()
        cur.execute("SELECT count(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'lockrace_notgalera'")
        assert cur.fetchone()[0] == 0
    finally:
        conn.close()


def test_bench_prints_the_cluster_start_up_time(server_tmp):
    import json

    res = run_lockrace(["bench", "--cluster", "galera", "--runs", "1", "--json"], lockrace_env(server_tmp), timeout=180)
    assert res.returncode == 0, res.stdout + res.stderr
    (row,) = json.loads(res.stdout)
    assert 0 < row["nodes_ready_s"] <= row["start_s"] < 120 and row["race_open_s"] > 0 and row["stop_s"] >= 0
    assert row["sst"] == "rsync" and "node2 ports" in row
    assert sorted(p.name for p in server_tmp.iterdir()) == [] and processes_mentioning(str(server_tmp)) == []


def test_app_in_a_terminal_on_galera_exits_on_sigterm_and_stops_both_nodes(server_tmp):
    """`lockrace --engine galera` in a pty: panels name the nodes; SIGTERM ends the app
    promptly, gives the terminal back, and both nodes and their temp dirs are gone."""
    import os

    from support.terminal import Terminal

    term = Terminal(["--engine", "galera"], lockrace_env(server_tmp, TERM="xterm-256color"))
    try:
        assert term.read_until(b"Session C @ node2", 90), term.screen[-2000:]
        assert term.read_until(b"engine: galera", 30), term.screen[-2000:]
        assert len([p for p in server_tmp.iterdir() if p.name.startswith("lockrace-galera-")]) == 2
        code, took = term.signal_and_wait(signal.SIGTERM)
    finally:
        term.close()
    term.assert_ended_cleanly(code, took, 10)
    assert processes_mentioning(str(server_tmp)) == []
    assert sorted(p.name for p in server_tmp.iterdir()) == []
    assert os.path.isdir(server_tmp)
