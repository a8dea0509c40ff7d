"""``lockrace rehearse``: a migration against live traffic, on real servers.

The relations the rehearsal must show (never wall-clock figures): with a long
transaction holding the table and no lock budget, the bystanders' longest
wait is about what was left of the long transaction when the migration
started (the queue formed behind the migration); with a short budget and
retries it stays near the budget and the migration still lands once the
long transaction is over.  The same on MariaDB through metadata locks.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import subprocess
import sys
import time
import uuid

import pytest
from support.cli import REPO, LiveRun, lockrace_env, processes_mentioning, server_tmp  # noqa: F401
from support.dsn import mysql_dsn, pg_dsn  # noqa: F401  (fixtures)

from lockrace.rehearse.policies import (DEFAULT_ATTEMPTS, PRESETS, Backoff, PolicyError, parse_policies,
                                        parse_policy)
from lockrace.rehearse.rehearsal import Plan, Rehearsal
from lockrace.rehearse.sqlfile import (DEFAULT_KEYS, DEFAULT_SETUP, DEFAULT_WORKLOAD, SqlFileError, read_migration,
                                       split, target_table, variant_of)
from lockrace.rehearse.stats import in_progress, percentile

HOLD_MS = 2000
ADD_COLUMN = "ALTER TABLE accounts ADD COLUMN flag int NOT NULL DEFAULT 0"


async def rehearse(backend, policy_text: str, migration: str = ADD_COLUMN, hold_ms: int = HOLD_MS,
                   duration: float = 4.0, clients: int = 4):
    """One policy rehearsed on a freshly set-up sandbox of the test session's server."""
    engine = backend.family
    policy = parse_policy(policy_text, engine)
    stmts = variant_of(split(migration, engine, "migration"), policy.variant, engine)
    assert stmts is not None
    await backend.reset_sandbox()
    await backend.run_admin(DEFAULT_SETUP[engine])
    plan = Plan(engine, clients, duration, hold_ms, DEFAULT_KEYS, DEFAULT_WORKLOAD, "accounts")
    rehearsal = Rehearsal(backend, plan, policy, stmts, rng=7)
    await asyncio.to_thread(rehearsal.run)
    assert rehearsal.error is None, rehearsal.error
    r = rehearsal.result
    assert r.waits.statements > 100 and r.waits.errors == 0, (r.waits, r.bystander_failures)
    return r


# ------------------------------------------------------------------ without a server

def test_policies_and_the_documented_defaults():
    p = parse_policy("lock_timeout=100ms+retry", "postgres")
    assert (p.budget_ms, p.attempts, p.backoff.kind) == (100.0, DEFAULT_ATTEMPTS, "exponential")
    assert p.budget_sql("postgres") == "SET lock_timeout = '100ms'"
    assert p.budget_sql("postgres", local=True) == "SET LOCAL lock_timeout = '100ms'"
    m = parse_policy("lock_wait_timeout=1+retry=4", "mysql")
    assert (m.budget_ms, m.attempts, m.budget_sql("mysql")) == (1000.0, 4, "SET SESSION lock_wait_timeout = 1")
    assert parse_policy("none", "mysql").budget_sql("mysql") == "SET SESSION lock_wait_timeout = 31536000"
    assert parse_policy("none", "postgres").budget_sql("postgres") == "SET lock_timeout = 0"
    # strong_migrations: the initializer's 10 s lock timeout, lock_timeout_retries 0, a 10 s retry delay
    sm = PRESETS["strong_migrations"]
    assert (sm.budget_ms, sm.attempts, sm.backoff.kind, sm.backoff.base_ms) == (10_000.0, 1, "constant", 10_000.0)
    # pgroll: --lock-timeout 500 ms, unlimited retries, full jitter below 1 s x 2^n, at most 1 minute
    pg = PRESETS["pgroll"]
    assert (pg.budget_ms, pg.attempts, pg.backoff.kind, pg.backoff.base_ms, pg.backoff.cap_ms) == \
        (500.0, None, "full-jitter", 1000.0, 60_000.0)
    assert parse_policy("concurrently", "postgres").variant == "concurrently"
    assert parse_policy("instant+lock_wait_timeout=1+retry", "mysql").variant == "instant"


@pytest.mark.parametrize("text,engine,says", [
    ("lock_timeout=100ms", "mysql", "lock_wait_timeout"),
    ("lock_wait_timeout=500ms", "mysql", "whole seconds"),
    ("lock_wait_timeout=1", "postgres", "lock_timeout"),
    ("pgroll", "mysql", "PostgreSQL only"),
    ("retry", "postgres", "needs a lock budget"),
    ("lock_timeout=0ms", "postgres", "more than 0"),
    ("pgroll+retry", "postgres", "its own lock budget"),
    ("none,none", "postgres", "given twice"),
    ("lock_timeout=fast", "postgres", "not a duration"),
    ("frobnicate", "postgres", "unknown policy"),
])
def test_bad_policies_say_why(text, engine, says):
    with pytest.raises(PolicyError, match=says):
        parse_policies(text, engine)


def test_backoff_grows_with_jitter_and_stays_under_its_cap():
    rnd = random.Random(1)
    exp = Backoff("exponential", 100.0, 5000.0)
    for n in range(1, 12):
        step = min(5000.0, 100.0 * 2 ** (n - 1))
        delays = [exp.delay_ms(n, rnd) for _ in range(50)]
        assert all(step / 2 <= d <= step for d in delays) and len(set(delays)) > 1
    full = Backoff("full-jitter", 1000.0, 60_000.0)
    assert all(0 <= full.delay_ms(n, rnd) < min(60_000.0, 1000.0 * 2 ** (n - 1)) for n in range(1, 12) for _ in range(20))
    assert Backoff("constant", 10_000.0, 10_000.0).delay_ms(5, rnd) == 10_000.0


def test_variants_and_the_table_a_migration_changes():
    pg = split("CREATE UNIQUE INDEX i ON public.accounts (balance); DROP INDEX j; REINDEX INDEX k", "postgres", "m")
    out = variant_of(pg, "concurrently", "postgres")
    assert [s.text for s in out] == ["CREATE UNIQUE INDEX CONCURRENTLY i ON public.accounts (balance)",
                                     "DROP INDEX CONCURRENTLY j", "REINDEX INDEX CONCURRENTLY k"]
    assert target_table(pg[0]) == "accounts"
    add = split(ADD_COLUMN, "postgres", "m")
    assert variant_of(add, "concurrently", "postgres") is None  # no concurrent form of ADD COLUMN
    assert target_table(add[0]) == "accounts"
    my = split("ALTER TABLE `Accounts` ADD COLUMN x int; ALTER TABLE t ADD INDEX (x), ALGORITHM=INPLACE", "mysql", "m")
    assert [s.text for s in variant_of(my, "instant", "mysql")] == [
        "ALTER TABLE `Accounts` ADD COLUMN x int, ALGORITHM=INSTANT", "ALTER TABLE t ADD INDEX (x), ALGORITHM=INPLACE"]
    assert target_table(my[0]) == "Accounts"


def test_bad_migration_files(tmp_path):
    cases = {"missing": None, "empty.sql": "-- nothing here\n", "open.sql": "ALTER TABLE t ADD COLUMN c text DEFAULT 'x",
             "txn.sql": "BEGIN; ALTER TABLE t ADD COLUMN c int; COMMIT;", "binary.sql": b"\xff\xfe\x00"}
    for name, body in cases.items():
        path = tmp_path / name
        if isinstance(body, bytes):
            path.write_bytes(body)
        elif body is not None:
            path.write_text(body)
        with pytest.raises(SqlFileError):
            read_migration(str(path), "postgres")


def test_stats_from_measurements():
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0 and percentile([1.0, 2.0, 3.0, 4.0], 99) == 4.0
    ms = 1_000_000
    # one statement waiting 250 ms from 100 ms on, one short one at 500 ms; columns of 100 ms
    cols = in_progress([100 * ms, 500 * ms], [250 * ms, 1 * ms], 0, 100 * ms, 6)
    assert cols[0] is None and cols[1] == 100 and cols[2] == 200 and cols[3] == 250 and cols[5] == 1


def test_bad_input_exits_2_with_one_sentence_before_any_server(tmp_path):
    good = tmp_path / "m.sql"
    good.write_text(ADD_COLUMN + ";\n")
    runs = [
        ["rehearse", str(tmp_path / "nope.sql")],
        ["rehearse", str(good), "--policies", "lock_timeout=100ms", "--engine", "mysql"],
        ["rehearse", str(good), "--policies", "concurrently"],
        ["rehearse", str(good), "--workload", str(tmp_path)],
    ]
    for args in runs:
        out = subprocess.run([sys.executable, "-m", "lockrace", *args], cwd=REPO, env=lockrace_env(tmp_path),
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 2, (args, out.stderr)
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("lockrace rehearse: "), out.stderr
        assert "Traceback" not in out.stderr and out.stdout == ""


def test_rehearse_does_not_load_textual():
    code = "import sys, lockrace.rehearse.cli, lockrace.rehearse.rehearsal, lockrace.rehearse.report; " \
           "print('textual' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "False"


# ------------------------------------------------------------------ on the servers

async def test_pg_without_budget_the_queue_lasts_the_long_transaction(pg_backend):
    r = await rehearse(pg_backend, "none", duration=2.5)
    left = r.remaining_ms
    assert left is not None and left > 0.8 * HOLD_MS - 200
    assert r.migration.outcome == "done" and len(r.migration.attempts) == 1
    assert 0.8 * left <= r.waits.max_ms <= left + 500, (r.waits, left)
    assert r.queue.queued >= 1 and r.migration.end_ns >= r.hold_until_ns - 50_000_000


async def test_pg_lock_timeout_and_retry_keeps_waits_near_the_budget(pg_backend):
    r = await rehearse(pg_backend, "lock_timeout=100ms+retry")
    left = r.remaining_ms
    attempts = r.migration.attempts
    assert r.migration.outcome == "done" and len(attempts) > 1, r.migration
    assert all(a.outcome == "lock_timeout" for a in attempts[:-1]) and attempts[-1].outcome == "landed"
    # each timed-out attempt kept to its budget (with room for a loaded machine), far below the hold
    assert all(a.ms < 100 + 400 for a in attempts[:-1])
    assert attempts[-1].end_ns >= r.hold_until_ns - 50_000_000  # landed once the long transaction ended
    # what bystanders waited behind the migration stays near the budget, far below the hold
    assert r.queue.during_max_ms < 100 + 400 and r.queue.during_max_ms < left / 3, (r.queue, r.waits, left)


async def test_pg_concurrently_builds_the_index_without_a_queue(pg_backend):
    r = await rehearse(pg_backend, "concurrently", migration="CREATE INDEX accounts_balance ON accounts (balance)",
                       duration=1.0)
    assert [s.text for s in r.statements] == ["CREATE INDEX CONCURRENTLY accounts_balance ON accounts (balance)"]
    assert r.migration.outcome == "done" and len(r.migration.attempts) == 1
    # the long transaction (READ COMMITTED, idle, holding ACCESS SHARE: no snapshot) is nothing
    # CREATE INDEX CONCURRENTLY waits for: it lands at once and the bystanders never queue
    assert r.migration.end_ns < r.hold_until_ns
    assert r.waits.max_ms < r.remaining_ms / 2, (r.waits, r.remaining_ms)


async def test_pg_a_policy_that_runs_out_of_attempts_is_reported_failed(pg_backend):
    r = await rehearse(pg_backend, "lock_timeout=50ms+retry=2", duration=1.0)
    assert r.migration.outcome == "failed" and len(r.migration.attempts) == 2
    assert "no more" in r.migration.reason
    assert all(a.outcome == "lock_timeout" for a in r.migration.attempts)


async def test_mariadb_metadata_lock_queue_and_lock_wait_timeout_retry(mysql_backend):
    plain = await rehearse(mysql_backend, "none", duration=2.5)
    left = plain.remaining_ms
    assert plain.migration.outcome == "done" and len(plain.migration.attempts) == 1
    assert 0.8 * left <= plain.waits.max_ms <= left + 500, (plain.waits, left)
    bounded = await rehearse(mysql_backend, "lock_wait_timeout=1+retry", duration=3.0)
    attempts = bounded.migration.attempts
    assert bounded.migration.outcome == "done" and len(attempts) > 1
    assert attempts[0].outcome == "lock_timeout" and attempts[-1].end_ns >= bounded.hold_until_ns - 50_000_000
    # whole seconds: the waits stay near the one-second budget, well under the queue without one
    assert bounded.queue.during_max_ms < 1000 + 300 and bounded.waits.max_ms < 0.75 * plain.waits.max_ms, \
        (bounded.queue, bounded.waits, plain.waits)


async def test_mariadb_answers_are_read_to_their_end(mysql_backend):
    """The MariaDB/MySQL bystanders read answers packet by packet: several results, an
    error half-way, many rows and long values all end where the server ends them, and
    the connection stays usable; a connection ended on the server reports itself lost."""
    from lockrace.rehearse.connections import Control, connect

    await mysql_backend.reset_sandbox()
    await mysql_backend.run_admin(DEFAULT_SETUP["mysql"])

    def work():
        conn = connect(mysql_backend, "rehearse-test")
        try:
            said = [conn.run("SELECT 1; SELECT 2, 3; UPDATE accounts SET balance = 0 WHERE id = 1"),
                    conn.run("SELECT 1; SELEC 2; SELECT 3"),
                    conn.run("SELECT REPEAT('x', 1000), id FROM accounts"),
                    conn.run("SELECT balance FROM accounts WHERE id = 1")]
            control = Control.of(mysql_backend)
            try:
                control.end([conn.ident])
            finally:
                control.close()
            said.append(conn.run("SELECT 1"))
            return said
        finally:
            conn.close()

    multi, error, rows, after, ended = await asyncio.to_thread(work)
    assert multi is None and rows is None and after is None
    assert error.code == "1064" and not error.lost and "SELEC 2" in error.message
    assert ended is not None and ended.lost


# ------------------------------------------------------------------ the command

def test_json_is_one_object_per_policy(tmp_path, pg_server):
    migration = tmp_path / "m.sql"
    migration.write_text(ADD_COLUMN + ";\n")
    out = subprocess.run(
        [sys.executable, "-m", "lockrace", "rehearse", str(migration), "--json", "--pg", pg_server.conninfo,
         "--policies", "none,lock_timeout=100ms+retry", "--hold-ms", "600", "--duration", "1.5", "--clients", "2"],
        cwd=REPO, env=lockrace_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert list(doc) == ["policies"] and [p["policy"] for p in doc["policies"]] == ["none", "lock_timeout=100ms+retry"]
    for p in doc["policies"]:
        assert list(p) == ["policy", "migration", "bystanders"]
        assert list(p["migration"]) == ["outcome", "attempts", "ms"] and p["migration"]["outcome"] == "done"
        assert list(p["bystanders"]) == ["statements", "errors", "p50_ms", "p99_ms", "max_ms"]
        assert p["bystanders"]["statements"] > 0 and p["bystanders"]["p50_ms"] <= p["bystanders"]["p99_ms"] \
            <= p["bystanders"]["max_ms"]
    assert doc["policies"][1]["migration"]["attempts"] > 1


def test_the_report_shows_table_chart_and_verdicts(tmp_path, mysql_server):
    migration = tmp_path / "m.sql"
    migration.write_text(ADD_COLUMN + ";\n")
    out = subprocess.run(
        [sys.executable, "-m", "lockrace", "rehearse", str(migration), "--engine", "mysql", "--mysql",
         _mysql_uri(mysql_server), "--policies", "none,lock_wait_timeout=1+retry", "--hold-ms", "1500",
         "--duration", "2", "--clients", "2"],
        cwd=REPO, env=lockrace_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "max behind migration" in text and "queue formed → drained" in text
    assert "longest bystander wait in progress" in text and "✓" in text and "x" in text.split("longest")[1]
    verdicts = [line for line in text.splitlines() if line.startswith(("Without", "With "))]
    assert verdicts[0].startswith("Without a lock budget, bystanders waited up to")
    assert verdicts[1].startswith("With lock_wait_timeout 1 s and up to 10 attempts")
    assert "landed on attempt 2" in text.replace("\n", " ")


def test_own_setup_and_workload(tmp_path, pg_server):
    """--setup and --workload: the bystanders run the given statements (``:id`` a key up to
    --keys) on the given table, and the long transaction holds the table the migration changes."""
    (tmp_path / "setup.sql").write_text(
        "CREATE TABLE orders (id int PRIMARY KEY, state text NOT NULL);\n"
        "INSERT INTO orders SELECT g, 'new' FROM generate_series(1, 500) AS g;\n")
    (tmp_path / "traffic.sql").write_text(
        "-- one statement a line\nSELECT state FROM orders WHERE id = :id;\nUPDATE orders SET state = 'paid' WHERE id = :id\n")
    (tmp_path / "m.sql").write_text("ALTER TABLE orders ADD COLUMN paid_at timestamptz;\n")
    out = subprocess.run(
        [sys.executable, "-m", "lockrace", "rehearse", str(tmp_path / "m.sql"), "--json", "--pg", pg_server.conninfo,
         "--setup", str(tmp_path / "setup.sql"), "--workload", str(tmp_path / "traffic.sql"), "--keys", "500",
         "--policies", "none", "--hold-ms", "800", "--duration", "1", "--clients", "2"],
        cwd=REPO, env=lockrace_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    (policy,) = json.loads(out.stdout)["policies"]
    assert policy["bystanders"]["statements"] > 0 and policy["bystanders"]["errors"] == 0
    assert policy["migration"]["outcome"] == "done" and policy["migration"]["ms"] >= 0.5 * 700
    assert policy["bystanders"]["max_ms"] >= 0.5 * 700  # they queued behind it on orders


def test_a_failed_migration_is_reported_and_exits_1(tmp_path, pg_server):
    migration = tmp_path / "m.sql"
    migration.write_text(ADD_COLUMN + ";\n")
    out = subprocess.run(
        [sys.executable, "-m", "lockrace", "rehearse", str(migration), "--json", "--pg", pg_server.conninfo,
         "--policies", "lock_timeout=50ms+retry=2", "--hold-ms", "1500", "--duration", "1", "--clients", "2"],
        cwd=REPO, env=lockrace_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert out.returncode == 1, out.stderr
    (policy,) = json.loads(out.stdout)["policies"]
    assert policy["migration"]["outcome"] == "failed" and policy["migration"]["attempts"] == 2


@pytest.mark.parametrize("engine", ["postgres", "mysql"])
def test_bad_sql_exits_2_with_one_sentence(engine, tmp_path, pg_server, mysql_server):
    migration = tmp_path / "m.sql"
    migration.write_text("ALTER TABLE accounts ADD COLUMN;\n")
    flags = ["--pg", pg_server.conninfo] if engine == "postgres" else ["--engine", "mysql", "--mysql", _mysql_uri(mysql_server)]
    out = subprocess.run([sys.executable, "-m", "lockrace", "rehearse", str(migration), *flags], cwd=REPO,
                         env=lockrace_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "does not run on" in lines[0] and "even alone" in lines[0], out.stderr
    assert "Traceback" not in out.stderr


def _mysql_uri(target) -> str:
    kw = target.mysql_kwargs
    if "unix_socket" in kw:
        return f"mysql://{kw['user']}@localhost/?unix_socket={kw['unix_socket']}"
    return f"mysql://{kw['user']}@{kw['host']}:{kw['port']}"


@pytest.mark.parametrize("engine", ["postgres", "mysql"])
def test_ctrl_c_while_the_migration_waits_leaves_nothing(engine, tmp_path, pg_dsn, mysql_dsn):  # noqa: F811
    token = uuid.uuid4().hex[:8]
    sandbox = f"lockrace_rh_{token}"
    migration = tmp_path / "m.sql"
    migration.write_text(ADD_COLUMN + ";\n")
    dbname = f"rehearse_{token}"
    if engine == "postgres":
        with pg_dsn.connect() as conn:
            conn.execute(f"CREATE DATABASE {dbname}")
        flags = ["--pg", pg_dsn.dsn(dbname)]
    else:
        flags = ["--engine", "mysql", "--mysql", mysql_dsn.dsn()]
    live = LiveRun(["rehearse", str(migration), "--policies", "none", "--hold-ms", "30000", "--duration", "30",
                    "--clients", "3", *flags], lockrace_env(tmp_path, LOCKRACE_SANDBOX=sandbox))
    try:
        deadline = time.monotonic() + 30
        while not _migration_waits(engine, pg_dsn, mysql_dsn, dbname, sandbox):
            assert live.proc.poll() is None, live.stderr
            assert time.monotonic() < deadline, "the migration never waited for the long transaction"
            time.sleep(0.05)
        t0 = time.monotonic()
        live.proc.send_signal(signal.SIGINT)
        code = live.finish(15)
        took = time.monotonic() - t0
        assert code == 130, live.stderr
        assert took < 2.0, f"took {took:.1f} s to stop"
        assert live.stderr.strip().splitlines() == ["lockrace: interrupted; statements cancelled, servers stopped"]
        assert "Traceback" not in live.stderr + live.stdout
        left, sandbox_there = _leftovers(engine, pg_dsn, mysql_dsn, dbname, sandbox)
        assert left == [] and not sandbox_there, (left, sandbox_there)
    finally:
        live.kill()
        if engine == "postgres":
            with pg_dsn.connect() as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {dbname} WITH (FORCE)")
        else:
            conn = mysql_dsn.connect()
            try:
                conn.cursor().execute(f"DROP DATABASE IF EXISTS `{sandbox}`")
            finally:
                conn.close()


def _migration_waits(engine, pg_dsn, mysql_dsn, dbname, sandbox) -> bool:  # noqa: F811
    if engine == "postgres":
        with pg_dsn.connect(dbname) as conn:
            return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND wait_event_type = 'Lock'"
                                " AND application_name LIKE '%%rehearse-migration'", [dbname]).fetchone()[0] > 0
    conn = mysql_dsn.connect()
    try:
        cur = conn.cursor()
        cur.execute("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = %s AND INFO LIKE 'ALTER TABLE%%'"
                    " AND STATE LIKE 'Waiting for table metadata lock%%'", (sandbox,))
        return cur.fetchone()[0] > 0
    finally:
        conn.close()


def _leftovers(engine, pg_dsn, mysql_dsn, dbname, sandbox):  # noqa: F811
    deadline = time.monotonic() + 5
    while True:
        if engine == "postgres":
            with pg_dsn.connect(dbname) as conn:
                left = conn.execute("SELECT pid, application_name FROM pg_stat_activity WHERE datname = %s"
                                    " AND pid <> pg_backend_pid()", [dbname]).fetchall()
                there = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s", [sandbox]).fetchone()[0]
        else:
            conn = mysql_dsn.connect()
            try:
                cur = conn.cursor()
                cur.execute("SELECT ID, INFO FROM information_schema.PROCESSLIST WHERE DB = %s", (sandbox,))
                left = list(cur.fetchall())
                cur.execute("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s", (sandbox,))
                there = cur.fetchone()[0]
            finally:
                conn.close()
        if (not left and not there) or time.monotonic() > deadline:
            return left, bool(there)
        time.sleep(0.05)


@pytest.mark.parametrize("engine", ["postgres", "mysql"])
def test_ctrl_c_on_a_private_server_stops_it_and_leaves_no_trace(engine, tmp_path, server_tmp):  # noqa: F811
    """Interrupted while the migration waits on lockrace's own server: the server is
    stopped, its temp dir removed, no process of it left, one line said."""
    migration = tmp_path / "m.sql"
    migration.write_text(ADD_COLUMN + ";\n")
    live = LiveRun(["rehearse", str(migration), "--engine", engine, "--policies", "none", "--hold-ms", "30000",
                    "--duration", "30", "--clients", "2"], lockrace_env(server_tmp))
    try:
        deadline = time.monotonic() + 40
        while not _private_migration_waits(engine, server_tmp):
            assert live.proc.poll() is None, live.stderr
            assert time.monotonic() < deadline, "the migration never waited for the long transaction"
            time.sleep(0.1)
        t0 = time.monotonic()
        live.proc.send_signal(signal.SIGINT)
        code = live.finish(15)
        took = time.monotonic() - t0
    finally:
        live.kill()
    assert code == 130 and took < 2.0, (code, took, live.stderr)
    assert live.stderr.strip().splitlines() == ["lockrace: interrupted; statements cancelled, servers stopped"]
    assert sorted(p.name for p in server_tmp.iterdir()) == [], "private server temp dir left behind"
    assert processes_mentioning(str(server_tmp)) == []


def _private_migration_waits(engine: str, tmp) -> bool:
    """Asked on the private server itself, through its socket in the run's TMPDIR."""
    import psycopg
    import pymysql

    sockets = [p for p in tmp.rglob("*") if p.is_socket()]
    try:
        if engine == "postgres":
            pg = [p for p in sockets if p.name.startswith(".s.PGSQL.")]
            if not pg:
                return False
            with psycopg.connect(host=str(pg[0].parent), port=int(pg[0].name.rsplit(".", 1)[1]), user="postgres",
                                 dbname="postgres", autocommit=True, connect_timeout=2) as conn:
                return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                                    " AND application_name LIKE '%rehearse-migration'").fetchone()[0] > 0
        my = [p for p in sockets if not p.name.startswith(".s.PGSQL.")]
        if not my:
            return False
        conn = pymysql.connect(unix_socket=str(my[0]), user="root", password="", connect_timeout=2)
        try:
            cur = conn.cursor()
            cur.execute("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE 'ALTER TABLE%'"
                        " AND STATE LIKE 'Waiting for table metadata lock%'")
            return cur.fetchone()[0] > 0
        finally:
            conn.close()
    except Exception:  # still starting, or a socket of another kind
        return False
