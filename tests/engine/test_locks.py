"""``lockrace locks`` on the real private servers: foreign clients holding and waiting,
a reader queued behind a pending ALTER, the JSON shape, the command line."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid

import psycopg
import pymysql
import pytest
from support.waits import eventually

from lockrace.locks import mysql as mysql_reader, pg as pg_reader
from lockrace.locks.jsonout import snapshot_dict
from lockrace.locks.sources import private_servers
from lockrace.locks.text import lines


def _until(read, ok, timeout=10.0):
    """Read snapshots until ``ok(snapshot)``; the last one either way."""
    return eventually(read, ok, timeout=timeout, fail=False)


class Clients:
    """Foreign connections that run statements in threads (a blocked one keeps waiting)."""

    def __init__(self, connect):
        self.connect = connect
        self.conns = []
        self.threads = []

    def open(self):
        conn = self.connect()
        self.conns.append(conn)
        return conn

    def start(self, conn, sql):
        def run():
            try:
                conn.cursor().execute(sql)
            except Exception:
                pass
        t = threading.Thread(target=run, daemon=True)
        t.start()
        self.threads.append(t)

    def close(self, end):
        for c in self.conns:
            try:
                end(c)
            except Exception:
                pass
        for t in self.threads:
            t.join(10)
        for c in self.conns:
            try:
                c.close()
            except Exception:
                pass


# ---------------------------------------------------------------- PostgreSQL

@pytest.fixture
def pg_schema(pg_server):
    schema = f"locks_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_server.conninfo, autocommit=True) as c:
        c.execute(f"CREATE SCHEMA {schema}")
        c.execute(f"CREATE TABLE {schema}.accounts (id int PRIMARY KEY, balance int)")
        c.execute(f"INSERT INTO {schema}.accounts VALUES (1, 100), (2, 100)")
    yield schema
    with psycopg.connect(pg_server.conninfo, autocommit=True) as c:
        c.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture
def pg_clients(pg_server):
    clients = Clients(lambda: psycopg.connect(pg_server.conninfo, autocommit=True, application_name="foreign"))

    def end(conn):
        with psycopg.connect(pg_server.conninfo, autocommit=True) as k:
            k.execute("SELECT pg_terminate_backend(%s)", [conn.info.backend_pid])
    yield clients
    clients.close(end)


def _pg_read(pg_server):
    conn = pg_reader.connect(pg_server.conninfo)
    return conn, lambda: pg_reader.read(conn, "test")


def test_pg_foreign_holder_and_two_waiters(pg_server, pg_schema, pg_clients):
    t = f"{pg_schema}.accounts"
    holder, w1, w2 = pg_clients.open(), pg_clients.open(), pg_clients.open()
    holder.execute("BEGIN")
    holder.execute(f"UPDATE {t} SET balance = 0 WHERE id = 1")
    pg_clients.start(w1, f"UPDATE {t} SET balance = 1 WHERE id = 1")
    _until(_pg_read(pg_server)[1], lambda s: s.waits_of(w1.info.backend_pid))
    pg_clients.start(w2, f"UPDATE {t} SET balance = 2 WHERE id = 1")
    conn, read = _pg_read(pg_server)
    try:
        snap = _until(read, lambda s: s.waits_of(w1.info.backend_pid) and s.waits_of(w2.info.backend_pid))
        h, p1, p2 = holder.info.backend_pid, w1.info.backend_pid, w2.info.backend_pid
        first, = snap.waits_of(p1)
        second, = snap.waits_of(p2)
        # the first waiter waits for the holder's transaction; the second for its place in the row's line
        assert (first.blocker, first.kind, first.mode, first.queued) == (h, "transactionid", "ShareLock", False)
        assert first.lock == f"row {t} (0,1), held through pid {h}'s transaction"
        assert f"waits for pid {h}'s transaction to end" in first.words
        assert (second.blocker, second.kind) == (p1, "tuple")
        assert "place in line" in second.words and "not a table lock" in second.words
        assert snap.roots() == [h]
        text = "\n".join(lines(snap))
        assert text.index(f"pid {h}") < text.index(f"pid {p1}  postgres  foreign") < text.index(f"pid {p2}  postgres")
        assert f"└── pid {p1}" in text and f"    └── pid {p2}" in text
        # every client session is listed, waiting or not, and never lockrace's own reading connection
        idents = {c.ident for c in snap.clients}
        assert {h, p1, p2} <= idents and conn.info.backend_pid not in idents
        doc = snapshot_dict(snap)
        waits = {w["waiter"]: w for w in doc["waits"]}
        assert set(waits[p1]) >= {"waiter", "blocker", "lock", "mode", "waiting_ms"}
        assert waits[p1]["blocker"] == h and waits[p2]["blocker"] == p1 and waits[p1]["waiting_ms"] >= 0
        assert json.loads(json.dumps(doc)) == doc
        session = next(s for s in doc["sessions"] if s["pid"] == h)
        assert session["application"] == "foreign" and session["state"] == "idle in transaction"
    finally:
        conn.close()
    # it took no lock: the holder still holds, the waiters still wait, in the same order
    holder.execute("ROLLBACK")
    for th in pg_clients.threads:
        th.join(10)
    assert all(not th.is_alive() for th in pg_clients.threads)


def test_pg_reader_queued_behind_pending_alter(pg_server, pg_schema, pg_clients):
    t = f"{pg_schema}.accounts"
    reader_h, alter, reader = pg_clients.open(), pg_clients.open(), pg_clients.open()
    reader_h.execute("BEGIN")
    reader_h.execute(f"SELECT * FROM {t}")
    pg_clients.start(alter, f"ALTER TABLE {t} ADD COLUMN note text")
    _until(_pg_read(pg_server)[1], lambda s: s.waits_of(alter.info.backend_pid))
    pg_clients.start(reader, f"SELECT * FROM {t}")
    conn, read = _pg_read(pg_server)
    try:
        pa, pr, ph = alter.info.backend_pid, reader.info.backend_pid, reader_h.info.backend_pid
        snap = _until(read, lambda s: s.waits_of(pr))
        a, = snap.waits_of(pa)
        r, = snap.waits_of(pr)
        assert (a.blocker, a.queued, a.mode) == (ph, False, "AccessExclusiveLock")
        assert a.lock == f"relation {t}" and "ACCESS EXCLUSIVE requested" in a.words
        # the reader is blocked by the ALTER's pending request, not by the reader that holds the lock
        assert (r.blocker, r.queued) == (pa, True)
        assert f"ACCESS SHARE requested; queued behind pid {pa}'s pending request" in r.words
        text = "\n".join(lines(snap))
        assert "queued behind another waiter's pending request" in text and "waits for a holder" in text
    finally:
        conn.close()
        reader_h.execute("ROLLBACK")


def test_pg_cli_json_and_discovery(pg_server, pg_schema, pg_clients):
    t = f"{pg_schema}.accounts"
    holder, waiter = pg_clients.open(), pg_clients.open()
    holder.execute("BEGIN")
    holder.execute(f"SELECT * FROM {t} WHERE id = 2 FOR UPDATE")
    pg_clients.start(waiter, f"SELECT * FROM {t} WHERE id = 2 FOR UPDATE")
    _until(_pg_read(pg_server)[1], lambda s: s.waits_of(waiter.info.backend_pid))
    res = subprocess.run([sys.executable, "-m", "lockrace", "locks", "--pg", pg_server.conninfo, "--json"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    wait = next(w for w in doc["waits"] if w["waiter"] == waiter.info.backend_pid)
    assert wait["blocker"] == holder.info.backend_pid and wait["mode"] == "ShareLock"
    assert isinstance(wait["waiting_ms"], float) and isinstance(doc["sessions"], list)
    # without a DSN: lockrace's own running private servers, this one among them
    socket_dir = pg_server.server.dir
    assert any(str(socket_dir) in s.where for s in private_servers(["postgres"]))
    res = subprocess.run([sys.executable, "-m", "lockrace", "locks", "--engine", "postgres"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert str(socket_dir) in res.stdout and f"pid {waiter.info.backend_pid}" in res.stdout
    holder.execute("ROLLBACK")


def test_cli_bad_input_is_one_sentence(tmp_path):
    res = subprocess.run([sys.executable, "-m", "lockrace", "locks", "--pg", "host=127.0.0.1 port=1 connect_timeout=2"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.startswith("lockrace locks: cannot read") and len(res.stderr.strip().splitlines()) == 1
    res = subprocess.run([sys.executable, "-m", "lockrace", "locks", "--mysql", "nonsense://x"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "Traceback" not in res.stderr and "not a MySQL DSN" in res.stderr


# ---------------------------------------------------------------- MariaDB

@pytest.fixture
def my_db(mysql_server):
    db = f"locks_{uuid.uuid4().hex[:8]}"
    c = pymysql.connect(**mysql_server.mysql_kwargs, autocommit=True)
    c.cursor().execute(f"CREATE DATABASE {db}")
    c.cursor().execute(f"CREATE TABLE {db}.accounts (id int PRIMARY KEY, balance int) ENGINE=InnoDB")
    c.cursor().execute(f"INSERT INTO {db}.accounts VALUES (1, 100), (2, 100)")
    c.close()
    yield db
    c = pymysql.connect(**mysql_server.mysql_kwargs, autocommit=True)
    c.cursor().execute(f"DROP DATABASE {db}")
    c.close()


@pytest.fixture
def my_clients(mysql_server):
    clients = Clients(lambda: pymysql.connect(**mysql_server.mysql_kwargs, autocommit=True))

    def end(conn):
        k = pymysql.connect(**mysql_server.mysql_kwargs, autocommit=True)
        try:
            k.cursor().execute(f"KILL {conn.thread_id()}")
        finally:
            k.close()
    yield clients
    clients.close(end)


def _my_read(mysql_server):
    conn = mysql_reader.connect(mysql_server.mysql_kwargs)
    return conn, lambda: mysql_reader.read(conn, "test")


def test_mariadb_foreign_holder_and_two_waiters(mysql_server, my_db, my_clients):
    holder, w1, w2 = my_clients.open(), my_clients.open(), my_clients.open()
    holder.cursor().execute("BEGIN")
    holder.cursor().execute(f"UPDATE {my_db}.accounts SET balance = 0 WHERE id = 1")
    my_clients.start(w1, f"UPDATE {my_db}.accounts SET balance = 1 WHERE id = 1")
    my_clients.start(w2, f"UPDATE {my_db}.accounts SET balance = 2 WHERE id = 1")
    conn, read = _my_read(mysql_server)
    try:
        h, t1, t2 = holder.thread_id(), w1.thread_id(), w2.thread_id()
        snap = _until(read, lambda s: s.waits_of(t1) and s.waits_of(t2))
        assert snap.server.startswith(("MariaDB", "MySQL"))
        blockers = {w.waiter: {x.blocker for x in snap.waits_of(w.waiter)} for w in snap.waits}
        assert h in blockers[t1] and h in blockers[t2]
        first = next(w for w in snap.waits_of(t1) if w.blocker == h)
        assert first.kind == "record" and first.lock == f"row {my_db}.accounts PRIMARY key 1"
        assert f"held through thread {h}'s transaction" in first.words
        assert first.mode.startswith("X")
        text = "\n".join(lines(snap))
        assert f"thread {h}" in text.splitlines()[1]
        doc = snapshot_dict(snap)
        assert {w["waiter"] for w in doc["waits"]} >= {t1, t2}
        assert all(set(w) >= {"waiter", "blocker", "lock", "mode", "waiting_ms"} for w in doc["waits"])
        assert conn.thread_id() not in {s["pid"] for s in doc["sessions"]}
    finally:
        conn.close()
        holder.cursor().execute("ROLLBACK")


def test_mariadb_reader_queued_behind_pending_alter(mysql_server, my_db, my_clients):
    holder, alter, reader = my_clients.open(), my_clients.open(), my_clients.open()
    holder.cursor().execute("BEGIN")
    holder.cursor().execute(f"SELECT * FROM {my_db}.accounts")
    my_clients.start(alter, f"ALTER TABLE {my_db}.accounts ADD COLUMN note text")
    conn, read = _my_read(mysql_server)
    try:
        _until(read, lambda s: s.waits_of(alter.thread_id()))
        my_clients.start(reader, f"SELECT * FROM {my_db}.accounts")
        snap = _until(read, lambda s: s.waits_of(reader.thread_id()))
        a = snap.waits_of(alter.thread_id())
        r = snap.waits_of(reader.thread_id())
        plugin = not any("METADATA_LOCK_INFO" in n for n in snap.notes)
        if plugin:
            assert [(w.blocker, w.queued) for w in a] == [(holder.thread_id(), False)]
        else:
            assert [w.blocker for w in a] == [None]
        # the reader is blocked by the pending ALTER, not by the reader that holds the table
        assert [(w.blocker, w.queued) for w in r] == [(alter.thread_id(), True)]
        assert r[0].lock == f"metadata lock on {my_db}.accounts" or r[0].lock.startswith("metadata lock on")
    finally:
        conn.close()
        holder.cursor().execute("ROLLBACK")


def test_watch_redraws_in_place_and_json_lines(pg_server):
    """--watch on a terminal redraws the same lines (cursor moved up, not scrolled); with
    --json it prints one JSON object a line; Ctrl-C ends it with status 0."""
    import os
    import pty
    import select
    import signal

    argv = [sys.executable, "-m", "lockrace", "locks", "--pg", pg_server.conninfo, "--watch", "--interval", "0.2"]
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        os.environ["COLUMNS"], os.environ["LINES"] = "120", "40"
        os.execv(sys.executable, argv)
    out = b""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and out.count(b"read at") < 3:
        if select.select([fd], [], [], 0.5)[0]:
            try:
                out += os.read(fd, 65536)
            except OSError:
                break
    os.kill(pid, signal.SIGINT)
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    assert out.count(b"read at") >= 3, out[-500:]
    assert b"\x1b[1A" in out or b"\x1b[2K" in out  # Rich's live display moves back up over the last frame
    assert os.waitstatus_to_exitcode(status) == 0
    proc = subprocess.Popen(argv + ["--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first, second = proc.stdout.readline(), proc.stdout.readline()
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(10)
    assert proc.returncode == 0, proc.stderr.read()
    for line in (first, second):
        doc = json.loads(line)
        assert set(doc) >= {"waits", "sessions"}


def test_pg_cycle_before_the_deadlock_check(pg_server, pg_schema, pg_clients):
    """Two clients in a cycle, seen before the server's deadlock check ends it: drawn once,
    with the cycle named; lockrace's own sessions by their letters."""
    t = f"{pg_schema}.accounts"
    a = psycopg.connect(pg_server.conninfo, autocommit=True, application_name="lockrace A")
    b = psycopg.connect(pg_server.conninfo, autocommit=True, application_name="lockrace B")
    pg_clients.conns += [a, b]
    for conn, row in ((a, 1), (b, 2)):
        conn.execute("SET deadlock_timeout = '20s'")
        conn.execute("BEGIN")
        conn.execute(f"UPDATE {t} SET balance = 0 WHERE id = {row}")
    pg_clients.start(a, f"UPDATE {t} SET balance = 1 WHERE id = 2")
    pg_clients.start(b, f"UPDATE {t} SET balance = 1 WHERE id = 1")
    conn, read = _pg_read(pg_server)
    try:
        pa, pb = a.info.backend_pid, b.info.backend_pid
        snap = _until(read, lambda s: s.waits_of(pa) and s.waits_of(pb))
        assert snap.cycles() == [sorted([pa, pb])]
        text = lines(snap)
        assert "  deadlock forming: cycle: A → B → A (the server's deadlock check ends it)" in text
        assert any(line.startswith(f"A (pid {pa})") for line in text)
        assert sum("↺ back to the start of the cycle" in line for line in text) == 1
        assert snapshot_dict(snap)["cycles"] == [sorted([pa, pb])]
    finally:
        conn.close()


def test_galera_each_node_read_on_its_own(galera_cluster):
    """A Galera node shows only its own locks: each node is read, and named."""
    from lockrace.locks.sources import Source

    nodes = list(galera_cluster.nodes.items())
    first = nodes[0][1].mysql_kwargs
    db = f"locks_{uuid.uuid4().hex[:8]}"
    setup = pymysql.connect(**first, autocommit=True)
    setup.cursor().execute(f"CREATE DATABASE {db}")
    setup.cursor().execute(f"CREATE TABLE {db}.accounts (id int PRIMARY KEY, balance int) ENGINE=InnoDB")
    setup.cursor().execute(f"INSERT INTO {db}.accounts VALUES (1, 100)")
    holder = pymysql.connect(**first, autocommit=True)
    waiter = pymysql.connect(**first, autocommit=True)
    clients = Clients(lambda: None)
    try:
        holder.cursor().execute("BEGIN")
        holder.cursor().execute(f"UPDATE {db}.accounts SET balance = 0 WHERE id = 1")
        clients.start(waiter, f"UPDATE {db}.accounts SET balance = 1 WHERE id = 1")
        sources = [Source("mysql", name, mysql_kwargs=t.mysql_kwargs) for name, t in nodes]
        conns = [s.connect() for s in sources]
        try:
            snaps = [_until(lambda: s.read(c), lambda snap: bool(snap.waits) or snap is None, timeout=10 if i == 0 else 0)
                     for i, (s, c) in enumerate(zip(sources, conns))]
        finally:
            for c in conns:
                c.close()
        assert [s.node for s in snaps] == [name for name, _ in nodes]
        assert all(any("a Galera node" in n for n in s.notes) for s in snaps)
        assert [(w.waiter, w.blocker) for w in snaps[0].waits] == [(waiter.thread_id(), holder.thread_id())]
        assert snaps[1].waits == []  # the other node knows nothing of node1's row locks
        text = "\n".join(lines(snaps[0]))
        assert f"(node {nodes[0][0]})" in text.splitlines()[0]
    finally:
        holder.cursor().execute("ROLLBACK")
        clients.close(lambda c: None)
        for c in (holder, waiter):
            c.close()
        setup.cursor().execute(f"DROP DATABASE {db}")
        setup.close()


def test_pg_lock_in_another_database_named_by_its_database(pg_server, pg_clients):
    """The reader sees every database's locks; a relation elsewhere is named with its database."""
    db = f"locks_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_server.conninfo, autocommit=True) as c:
        c.execute(f"CREATE DATABASE {db}")
    other = pg_server.conninfo.replace("dbname=postgres", f"dbname={db}")
    try:
        clients = Clients(lambda: psycopg.connect(other, autocommit=True))
        h, w = clients.open(), clients.open()
        h.execute("CREATE TABLE t (id int)")
        h.execute("BEGIN")
        h.execute("LOCK TABLE t IN ACCESS EXCLUSIVE MODE")
        clients.start(w, "SELECT * FROM t")
        conn, read = _pg_read(pg_server)  # reads from the postgres database
        try:
            snap = _until(read, lambda s: s.waits_of(w.info.backend_pid))
            wait, = snap.waits_of(w.info.backend_pid)
            assert wait.lock.startswith("relation ") and wait.lock.endswith(f" in database {db}")
            assert wait.blocker == h.info.backend_pid and not wait.queued
        finally:
            conn.close()
            h.execute("ROLLBACK")
            clients.close(lambda c: None)
    finally:
        with psycopg.connect(pg_server.conninfo, autocommit=True) as c:
            c.execute(f"DROP DATABASE {db} WITH (FORCE)")


async def test_a_race_seen_from_outside_by_letter(pg_server, pg_backend, make_race):
    """The model the app's lock view uses: a race's own sessions by letter, read from its target."""
    import asyncio

    from lockrace.locks import Source, session_names

    race = await make_race(pg_backend, ("A", "B"))
    await pg_backend.run_admin(["CREATE TABLE accounts (id int PRIMARY KEY)", "INSERT INTO accounts VALUES (1)"])
    await race.run("A", "BEGIN;")
    await race.run("A", "SELECT * FROM accounts WHERE id = 1 FOR UPDATE;")
    stmt = race.submit("B", "SELECT * FROM accounts WHERE id = 1 FOR UPDATE;")
    assert await race.wait_blocked_or_done(stmt, 10)
    source = Source.from_target(pg_server)
    conn = await asyncio.to_thread(source.connect)
    try:
        snap = await asyncio.to_thread(source.read, conn)
    finally:
        conn.close()
    snap.name(session_names(race))
    wait, = snap.waits_of(race.sessions["B"].ident)
    assert snap.label(wait.waiter) == "B" and snap.label(wait.blocker) == "A"
    assert wait.lock.endswith("held through A's transaction")
    await race.run("A", "ROLLBACK;")
    await race.settled("B")


@pytest.fixture(scope="module")
def mariadb_without_mdl_info():
    """A private MariaDB of this module's own, started without the METADATA_LOCK_INFO plugin."""
    from lockrace.servers.private_mysql import PrivateMySQL
    from lockrace.servers.process import ServerStartError

    class NoPlugin(PrivateMySQL):
        def _plugin_dir(self):
            return None

    try:
        server = NoPlugin()
    except ServerStartError as exc:
        from support.servers import _unavailable
        _unavailable("MariaDB", exc)
    assert server.flavor == "mariadb"  # (mariadb_only: MySQL has performance_schema.metadata_locks)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.mariadb_only
def test_mariadb_without_metadata_lock_info_says_so(mariadb_without_mdl_info):
    kw = mariadb_without_mdl_info.connect_kwargs()
    setup = pymysql.connect(**kw, autocommit=True)
    setup.cursor().execute("CREATE DATABASE IF NOT EXISTS d")
    setup.cursor().execute("CREATE TABLE d.accounts (id int PRIMARY KEY) ENGINE=InnoDB")
    clients = Clients(lambda: pymysql.connect(**kw, autocommit=True))
    holder, alter, reader = clients.open(), clients.open(), clients.open()
    conn = mysql_reader.connect(kw)
    try:
        holder.cursor().execute("BEGIN")
        holder.cursor().execute("SELECT * FROM d.accounts")
        clients.start(alter, "ALTER TABLE d.accounts ADD COLUMN note text")
        _until(lambda: mysql_reader.read(conn), lambda s: s.waits_of(alter.thread_id()))
        clients.start(reader, "SELECT * FROM d.accounts")
        snap = _until(lambda: mysql_reader.read(conn), lambda s: s.waits_of(reader.thread_id()))
        assert any("METADATA_LOCK_INFO plugin is not loaded" in n for n in snap.notes)
        assert [w.blocker for w in snap.waits_of(alter.thread_id())] == [None]  # the server does not say who
        assert [(w.blocker, w.queued) for w in snap.waits_of(reader.thread_id())] == [(alter.thread_id(), True)]
        text = "\n".join(lines(snap))
        assert "note: MariaDB names no metadata-lock holder here" in text
        assert "waits for an unnamed holder: metadata lock on d.accounts" in text
        # the reader is drawn under the ALTER it is queued behind
        at = text.index("waits for an unnamed holder")
        assert f"└── thread {reader.thread_id()}" in text[at:], text
        assert snapshot_dict(snap)["waits"][0]["blocker"] in (None, alter.thread_id())
    finally:
        conn.close()
        holder.cursor().execute("ROLLBACK")
        clients.close(lambda c: None)
        setup.cursor().execute("DROP DATABASE d")
        setup.close()


def test_pg_prepared_transaction_as_a_holder(pg_server, pg_schema, pg_clients):
    """A prepared transaction holds locks without a session: pg_blocking_pids says pid 0."""
    t = f"{pg_schema}.accounts"
    gid = f"locks_{uuid.uuid4().hex[:8]}"
    prep, waiter = pg_clients.open(), pg_clients.open()
    prep.execute("BEGIN")
    prep.execute(f"UPDATE {t} SET balance = 0 WHERE id = 1")
    prep.execute(f"PREPARE TRANSACTION '{gid}'")
    try:
        pg_clients.start(waiter, f"UPDATE {t} SET balance = 1 WHERE id = 1")
        conn, read = _pg_read(pg_server)
        try:
            snap = _until(read, lambda s: s.waits_of(waiter.info.backend_pid))
        finally:
            conn.close()
        wait, = snap.waits_of(waiter.info.backend_pid)
        assert wait.blocker == 0 and snap.label(0) == "a prepared transaction"
        assert wait.lock == f"row {t} (0,1), held by a prepared transaction"
        assert "waits until it is finished by COMMIT PREPARED or ROLLBACK PREPARED" in wait.words
        text = lines(snap)
        assert text[1].startswith("a prepared transaction  prepared: holds its locks until COMMIT PREPARED")
    finally:
        with psycopg.connect(pg_server.conninfo, autocommit=True) as c:
            c.execute(f"ROLLBACK PREPARED '{gid}'")


def test_standby_reader_blocked_by_replay(pg_standby_pair):
    """On a hot standby the holder of a replayed lock is the startup process, named so."""
    from lockrace.core.events import REPLAY_PROCESS
    from lockrace.servers.pg_standby import wait_replayed

    pair = pg_standby_pair
    primary, standby = pair.primary_conninfo(), pair.standby_conninfo()
    name = f"locks_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(primary, autocommit=True) as c:
        c.execute(f"CREATE TABLE {name} (id int)")
    wait_replayed(primary, standby)
    holder = psycopg.connect(primary, autocommit=True)
    clients = Clients(lambda: psycopg.connect(standby, autocommit=True))
    reader = clients.open()
    try:
        holder.execute("BEGIN")
        holder.execute(f"LOCK TABLE {name} IN ACCESS EXCLUSIVE MODE")
        wait_replayed(primary, standby)
        clients.start(reader, f"SELECT * FROM {name}")
        conn = pg_reader.connect(standby)
        try:
            snap = _until(lambda: pg_reader.read(conn, "standby"), lambda s: s.waits_of(reader.info.backend_pid))
        finally:
            conn.close()
        wait, = snap.waits_of(reader.info.backend_pid)
        assert snap.label(wait.blocker) == REPLAY_PROCESS
        assert any(line.startswith(REPLAY_PROCESS) for line in lines(snap))
        assert f"waits for {REPLAY_PROCESS}, which holds ACCESS EXCLUSIVE" in wait.words
    finally:
        holder.execute("ROLLBACK")
        clients.close(lambda c: None)
        holder.execute(f"DROP TABLE {name}")
        holder.close()
