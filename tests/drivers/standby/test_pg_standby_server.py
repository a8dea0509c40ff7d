"""The private PostgreSQL primary + hot standby, and the hot-standby lessons
checked with the bare driver (psycopg), before any lockrace engine code:
what the standby's own views report and which errors the servers send."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import psycopg
import pytest

from lockrace.servers.pg_standby import StandbyPair, flush_wal, wait_replayed


def _connect(conninfo: str) -> psycopg.Connection:
    conn = psycopg.connect(conninfo, autocommit=True, connect_timeout=5)
    conn.execute("SET lc_messages = 'C'")
    return conn


class Background:
    """A statement running on its own thread; .result is (sqlstate, message, detail, seconds)."""

    def __init__(self, conn: psycopg.Connection, sql: str):
        self.result = None
        self.thread = threading.Thread(target=self._run, args=(conn, sql), daemon=True)
        self.thread.start()

    def _run(self, conn, sql):
        t0 = time.perf_counter_ns()
        try:
            rows = conn.execute(sql).fetchall()
            self.result = ("ok", rows, "", (time.perf_counter_ns() - t0) / 1e9)
        except psycopg.Error as exc:
            self.result = (exc.sqlstate, exc.diag.message_primary, exc.diag.message_detail,
                           (time.perf_counter_ns() - t0) / 1e9)

    def join(self, timeout=10.0):
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the statement did not finish"
        return self.result


def _until(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.01)
    raise AssertionError("condition not met in time")


@pytest.fixture
def nodes(pg_standby_pair):
    """(primary, standby, standby monitor) connections and a fresh table."""
    pair = pg_standby_pair
    primary, standby, monitor = (_connect(pair.primary_conninfo()), _connect(pair.standby_conninfo()),
                                 _connect(pair.standby_conninfo()))
    primary.execute("DROP TABLE IF EXISTS lessons")
    primary.execute("CREATE TABLE lessons (id int PRIMARY KEY, v int)")
    primary.execute("INSERT INTO lessons SELECT g, g FROM generate_series(1, 100) g")
    wait_replayed(pair.primary_conninfo(), pair.standby_conninfo())
    yield primary, standby, monitor
    for conn in (standby, monitor):
        conn.close()
    primary.execute("DROP TABLE IF EXISTS lessons")
    primary.close()


def test_pair_streams_from_a_slot_and_stops_cleanly():
    pair = StandbyPair().start()
    dirs = [pair.primary.dir, pair.standby.dir]
    pids = [pair.primary.proc.pid, pair.standby.proc.pid]
    try:
        with _connect(pair.standby_conninfo()) as s:
            assert s.execute("SELECT pg_is_in_recovery()").fetchone()[0] is True
            assert s.execute("SELECT status FROM pg_stat_wal_receiver").fetchone()[0] == "streaming"
        with _connect(pair.primary_conninfo()) as p:
            assert p.execute("SELECT state FROM pg_stat_replication").fetchone()[0] == "streaming"
            assert p.execute("SELECT active FROM pg_replication_slots WHERE slot_name = 'lockrace_standby'"
                             ).fetchone()[0] is True
        assert pair.timings["total_s"] > 0
    finally:
        pair.stop()
    assert not any(Path(d).exists() for d in dirs)
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_access_exclusive_lock_is_replayed_and_blocks_standby_reader(nodes, pg_standby_pair):
    primary, standby, monitor = nodes
    primary.execute("BEGIN")
    primary.execute("LOCK TABLE lessons IN ACCESS EXCLUSIVE MODE")
    wait_replayed(pg_standby_pair.primary_conninfo(), pg_standby_pair.standby_conninfo())
    reader = Background(standby, "SELECT count(*) FROM lessons")
    pid = standby.info.backend_pid
    # the standby's own views: the reader waits on a relation lock held by the startup process
    blockers = _until(lambda: monitor.execute(
        "SELECT pg_blocking_pids(pid) FROM pg_stat_activity WHERE pid = %s AND wait_event_type = 'Lock'",
        [pid]).fetchone())
    assert len(blockers[0]) == 1
    startup = blockers[0][0]
    assert monitor.execute("SELECT backend_type FROM pg_stat_activity WHERE pid = %s", [startup]
                           ).fetchone()[0] == "startup"
    assert monitor.execute(
        "SELECT mode, granted FROM pg_locks WHERE pid = %s AND relation = 'lessons'::regclass", [startup]
    ).fetchone() == ("AccessExclusiveLock", True)
    time.sleep(0.3)
    assert reader.result is None, "the standby reader should still be blocked"
    primary.execute("COMMIT")
    assert reader.join()[:2] == ("ok", [(100,)])


@pytest.mark.parametrize("ddl", ["LOCK TABLE lessons IN ACCESS EXCLUSIVE MODE", "TRUNCATE lessons", "DROP TABLE lessons"])
def test_standby_query_holding_up_replay_is_cancelled(nodes, ddl):
    primary, standby, monitor = nodes
    reader = Background(standby, "SELECT count(*), pg_sleep(10) FROM lessons")
    _until(lambda: monitor.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s AND wait_event = 'PgSleep'",
                                   [standby.info.backend_pid]).fetchone())
    primary.execute("BEGIN")
    primary.execute(ddl)
    flush_wal(primary)
    # replay (the startup process) now waits for the reader's AccessShareLock
    wait = _until(lambda: monitor.execute(
        "SELECT a.wait_event_type, a.wait_event, l.mode FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid"
        " WHERE a.backend_type = 'startup' AND NOT l.granted").fetchone())
    assert wait == ("Lock", "relation", "AccessExclusiveLock")
    code, message, detail, seconds = reader.join()
    primary.execute("ROLLBACK")
    assert (code, message) == ("40001", "canceling statement due to conflict with recovery")
    assert detail == "User was holding a relation lock for too long."
    # max_standby_streaming_delay is 1 s on the private standby (the query would sleep 10 s)
    assert 0.9 < seconds < 8.0


def _ended(monitor, pid: int, timeout: float = 10.0) -> None:
    """Wait until the standby has ended backend ``pid`` (no sleeping on a guess)."""
    _until(lambda: not monitor.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone(), timeout)


def test_idle_transaction_holding_up_replay_loses_its_connection(nodes):
    primary, standby, monitor = nodes
    standby.execute("BEGIN")
    standby.execute("SELECT count(*) FROM lessons")
    t0 = time.perf_counter_ns()
    primary.execute("TRUNCATE lessons")
    flush_wal(primary)
    _ended(monitor, standby.info.backend_pid)
    assert (time.perf_counter_ns() - t0) / 1e9 > 0.9  # not before max_standby_streaming_delay
    with pytest.raises(psycopg.OperationalError) as info:
        standby.execute("SELECT 1")
    assert info.value.sqlstate == "40001"
    assert info.value.diag.message_primary == "terminating connection due to conflict with recovery"
    assert standby.closed


def _set_feedback(monitor, pair, on: bool):
    if on:
        monitor.execute("ALTER SYSTEM SET hot_standby_feedback = on")
    else:
        monitor.execute("ALTER SYSTEM RESET hot_standby_feedback")
    monitor.execute("SELECT pg_reload_conf()")
    _until(lambda: monitor.execute("SHOW hot_standby_feedback").fetchone()[0] == ("on" if on else "off"))
    # the primary hears of it: the slot's xmin is set (feedback on) or cleared (off)
    with _connect(pair.primary_conninfo()) as primary:
        _until(lambda: primary.execute("SELECT (xmin IS NOT NULL) = %s FROM pg_replication_slots", [on]).fetchone()[0])


def test_hot_standby_feedback_decides_the_vacuum_conflict(nodes, pg_standby_pair):
    primary, standby, monitor = nodes
    pair = pg_standby_pair
    # feedback off (the default): VACUUM on the primary removes rows a standby snapshot needs
    standby.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
    assert standby.execute("SELECT count(*) FROM lessons").fetchone()[0] == 100
    primary.execute("DELETE FROM lessons WHERE id > 50")
    primary.execute("VACUUM lessons")
    flush_wal(primary)
    assert _until(lambda: monitor.execute(
        "SELECT wait_event FROM pg_stat_activity WHERE backend_type = 'startup'"
        " AND wait_event = 'RecoveryConflictSnapshot'").fetchone())
    _ended(monitor, standby.info.backend_pid)
    with pytest.raises(psycopg.OperationalError) as info:
        standby.execute("SELECT count(*) FROM lessons")
    assert info.value.sqlstate == "40001"
    assert info.value.diag.message_detail == "User query might have needed to see row versions that must be removed."

    # feedback on: the standby reports its oldest snapshot, VACUUM keeps those rows, no conflict
    _set_feedback(monitor, pair, True)
    try:
        primary.execute("INSERT INTO lessons SELECT g, g FROM generate_series(51, 100) g")
        wait_replayed(pair.primary_conninfo(), pair.standby_conninfo())
        standby2 = _connect(pair.standby_conninfo())
        standby2.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        assert standby2.execute("SELECT count(*) FROM lessons").fetchone()[0] == 100
        primary.execute("DELETE FROM lessons WHERE id > 50")
        primary.execute("VACUUM lessons")
        wait_replayed(pair.primary_conninfo(), pair.standby_conninfo())
        time.sleep(2.0)  # twice max_standby_streaming_delay: a conflict would have ended standby2 by now
        assert standby2.execute("SELECT count(*) FROM lessons").fetchone()[0] == 100
        standby2.execute("COMMIT")

        # ... but feedback does nothing for a lock: TRUNCATE still cancels a standby reader
        reader = Background(standby2, "SELECT count(*), pg_sleep(10) FROM lessons")
        _until(lambda: monitor.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s AND wait_event = 'PgSleep'",
                                       [standby2.info.backend_pid]).fetchone())
        primary.execute("TRUNCATE lessons")
        flush_wal(primary)
        code, _, detail, _ = reader.join()
        assert (code, detail) == ("40001", "User was holding a relation lock for too long.")
        standby2.close()
    finally:
        _set_feedback(monitor, pair, False)
