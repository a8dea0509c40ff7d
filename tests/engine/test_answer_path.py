"""The way from a submitted statement to its answer (what a caller of Race.run waits):
sent at once, a short answer read on the event loop and timed by its arrival (a
busy loop does not stretch it), a long one on the session's own thread, the
answer back before the refusal's holder is asked (real PostgreSQL and MariaDB; the thread on
its own, no server)."""

from __future__ import annotations

import asyncio
import threading
import time

import psycopg
import pytest

from lockrace.backends.worker import SessionThread
from lockrace.core.events import SessionState, StatementExplained, StatementFinished, StatementStarted
from support.series import series_sql


async def test_statement_is_on_the_wire_when_submit_returns(pg_server, pg_backend, make_race):
    race = await make_race(pg_backend, ("A",))
    stmt = race.submit("A", "SELECT pg_sleep(0.3) AS lockrace_probe")
    # no await since submit: the loop has not run anything of the race yet, and the
    # server already runs the statement (a blocking connection of our own asks it)
    with psycopg.connect(pg_server.conninfo, autocommit=True) as other:
        row = other.execute("SELECT state, query FROM pg_stat_activity WHERE pid = %s",
                            [race.sessions["A"].ident]).fetchone()
    assert row is not None and row[0] == "active" and "lockrace_probe" in row[1], row
    await stmt.done.wait()
    assert stmt.result.outcome == "ok"
    assert 300 <= stmt.result.elapsed_ns / 1e6 < 2000  # timed from the send to the answer


async def test_refusal_answer_comes_before_its_holder_is_named(pg_backend, make_race):
    race = await make_race(pg_backend, ("A", "B"))
    await pg_backend.run_admin(["CREATE TABLE answer_rows (id int PRIMARY KEY)", "INSERT INTO answer_rows VALUES (1)"])
    order: list[tuple[str, object]] = []
    race.subscribe(lambda e: order.append((type(e).__name__, getattr(e.result, "held_by", "-")))
                   if isinstance(e, (StatementFinished, StatementExplained)) and e.session == "B" else None)
    await race.run("A", "BEGIN")
    await race.run("A", "SELECT id FROM answer_rows WHERE id = 1 FOR UPDATE")
    res = await race.run("B", "SELECT id FROM answer_rows WHERE id = 1 FOR UPDATE NOWAIT")
    assert res.outcome == "refused"
    assert race.sessions["B"].busy  # still asking who holds the row: the next statement waits for it
    # Race.run waits for that question before B's next statement: never "busy"
    again = await race.run("B", "SELECT 1")
    assert again.outcome == "ok"
    assert res.held_by == ("A",)
    assert order[:2] == [("StatementFinished", None), ("StatementExplained", ("A",))]
    await race.run("A", "ROLLBACK")


async def test_session_thread_answers_and_errors():
    worker = SessionThread("lockrace-test")
    try:
        assert await worker.submit(lambda a, b: a + b, 2, 3) == 5
        with pytest.raises(ZeroDivisionError):
            await worker.submit(lambda: 1 / 0)
        names = await worker.submit(lambda: threading.current_thread().name)
        assert names == "lockrace-test"
    finally:
        worker.stop()


async def test_session_thread_finishes_a_call_its_caller_gave_up():
    worker = SessionThread("lockrace-test")
    finished = threading.Event()

    def slow():
        time.sleep(0.2)
        finished.set()
        return "late"

    try:
        future = worker.submit(slow)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(future, 0.05)
        assert future.cancelled()
        # the call is never abandoned half-way: it ends, and the next one runs after it
        assert await worker.submit(lambda: finished.is_set()) is True
    finally:
        worker.stop()


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


@pytest.mark.parametrize("busy", [time.sleep, _spin], ids=["sleeping", "running-python"])
async def test_a_busy_loop_does_not_stretch_a_statements_time(engine, backend, make_race, busy):
    """The loop is held for 150 ms right after the send (an app redrawing its screen):
    the refusal arrives meanwhile, and its time is when it arrived, not when the loop
    got round to reading it (PostgreSQL and MariaDB both read short answers there)."""
    race = await make_race(backend, ("A", "B"))
    innodb = " ENGINE=InnoDB" if engine == "mysql" else ""
    await backend.run_admin([f"CREATE TABLE busy_rows (id int PRIMARY KEY){innodb}", "INSERT INTO busy_rows VALUES (1)"])
    await race.run("A", "BEGIN")
    await race.run("A", "SELECT id FROM busy_rows WHERE id = 1 FOR UPDATE")
    for _ in range(3):
        t0 = time.perf_counter()
        stmt = race.submit("B", "SELECT id FROM busy_rows WHERE id = 1 FOR UPDATE NOWAIT")
        busy(0.15)
        await stmt.answered.wait()
        waited_ms = (time.perf_counter() - t0) * 1000
        await race.settled("B")
        assert stmt.result.outcome == "refused"
        assert waited_ms >= 150
        assert stmt.result.elapsed_ns / 1e6 < 50, (stmt.result.elapsed_ns / 1e6, waited_ms)
    await race.run("A", "ROLLBACK")


async def test_the_loop_wakes_while_an_answer_is_due_and_rests_after(engine, backend, make_race, monkeypatch):
    """While B waits for its lock, the loop wakes every 20 ms (a CPU quiet for long
    is slow to take the answer in: see loop_answer.AWAKE_TICK_S); once nothing is
    due, it sleeps without a tick."""
    from lockrace.backends import loop_answer

    ticks: list[float] = []
    real_tick = loop_answer._KeepAwake._tick

    def counted(self, loop):
        ticks.append(time.perf_counter())
        real_tick(self, loop)

    monkeypatch.setattr(loop_answer._KeepAwake, "_tick", counted)
    race = await make_race(backend, ("A", "B"))
    innodb = " ENGINE=InnoDB" if engine == "mysql" else ""
    await backend.run_admin([f"CREATE TABLE awake_rows (id int PRIMARY KEY){innodb}", "INSERT INTO awake_rows VALUES (1)"])
    budget = "SET lock_timeout = '500ms'" if engine == "postgres" else "SET SESSION innodb_lock_wait_timeout = 1"
    await race.run("B", budget)
    await race.run("A", "BEGIN")
    await race.run("A", "SELECT id FROM awake_rows WHERE id = 1 FOR UPDATE")
    await asyncio.sleep(0.1)
    loop = asyncio.get_running_loop()
    assert not loop_answer.kept_awake(loop)  # nothing due: no tick
    before = len(ticks)
    t0 = time.perf_counter()
    res = await race.run("B", "SELECT id FROM awake_rows WHERE id = 1 FOR UPDATE")
    t1 = time.perf_counter()
    assert res.outcome == "timed_out", (res.outcome, res.message)
    during = [t for t in ticks[before:] if t0 <= t <= t1]
    # 25 (PostgreSQL, 500 ms) or 50 (MariaDB, 1 s) at 20 ms each, fewer on a loaded machine
    assert len(during) >= 5, (len(during), t1 - t0)
    await race.settled("B")
    await asyncio.sleep(0.05)  # the tick that sees the answer done stops
    assert not loop_answer.kept_awake(loop)
    rested = len(ticks)
    await asyncio.sleep(0.1)
    assert len(ticks) == rested  # asleep with nothing due
    await race.run("A", "ROLLBACK")


async def test_every_answer_path_tells_the_listeners_once(pg_backend, make_race):
    """Answers read on the loop (a refusal, a short SELECT), handed to the thread (a
    long result), with the state read back (SET, COMMIT, an error in a transaction):
    each statement is started, finished and followed by the session's state once."""
    race = await make_race(pg_backend, ("A", "B"))
    await pg_backend.run_admin(["CREATE TABLE told_rows (id int PRIMARY KEY)", "INSERT INTO told_rows VALUES (1)"])
    events: list = []
    race.subscribe(lambda e: events.append(e) if e.session == "B" else None)
    await race.run("A", "BEGIN")
    await race.run("A", "SELECT id FROM told_rows WHERE id = 1 FOR UPDATE")
    steps = [
        ("SELECT id FROM told_rows WHERE id = 1 FOR UPDATE NOWAIT", "refused"),
        ("SELECT 1 AS one", "ok"),
        ("SELECT g FROM generate_series(1, 50000) AS g", "ok"),
        ("SET lock_timeout = '50ms'", "ok"),
        ("SELECT id FROM told_rows WHERE id = 1 FOR UPDATE", "timed_out"),
        ("BEGIN", "ok"),
        ("SELECT 1/0", "error"),
        ("SELECT 1", "error"),
        ("ROLLBACK", "ok"),
    ]
    for sql, outcome in steps:
        res = await race.run("B", sql)
        assert res.outcome == outcome, (sql, res.outcome, res.message)
        await race.settled("B")
    assert race.sessions["B"].txn == "idle"
    big = next(e.result for e in events if isinstance(e, StatementFinished) and "generate_series" in e.sql)
    assert (big.total_rows, len(big.rows)) == (50000, 200)
    kinds = [type(e).__name__ for e in events if isinstance(e, (StatementStarted, StatementFinished, SessionState))]
    assert kinds == ["StatementStarted", "StatementFinished", "SessionState"] * len(steps), kinds
    states = [e.txn for e in events if isinstance(e, SessionState)]
    assert states == ["idle"] * 5 + ["in transaction", "failed transaction", "failed transaction", "idle"]
    await race.run("A", "ROLLBACK")


async def test_a_loop_off_the_main_thread_has_the_session_thread_read(pg_backend):
    """Where the loop cannot note an answer's arrival (not the main thread: no signal
    handlers there), the session's thread reads and times every answer."""
    answers: list = []

    async def elsewhere():
        session = await pg_backend.connect_session("offmain")
        try:
            answers.append(await session.execute("SELECT 41 + 1"))
            answers.append(await session.execute("SELECT pg_sleep(0.05)"))
            answers.append(await session.execute("SELECT 1/0"))
        finally:
            await session.close()

    thread = threading.Thread(target=asyncio.run, args=(elsewhere(),))
    thread.start()
    await asyncio.to_thread(thread.join, 30)
    assert [a.outcome for a in answers] == ["ok", "ok", "error"]
    assert answers[0].rows == [("42",)]
    assert answers[1].elapsed_ns / 1e6 >= 50
    assert answers[2].code == "22012"


async def test_a_lock_error_outside_a_transaction_reaches_the_caller_as_it_arrives(pg_backend, make_race):
    """A refusal or timeout that is the first thing the server says, in a session outside
    any transaction, is the caller's as soon as it arrives (the server then ends the
    implicit transaction: the session is idle once the server is ready again).  Inside a
    transaction, or after other results, the caller waits for the session's state."""
    race = await make_race(pg_backend, ("A", "B"))
    await pg_backend.run_admin(["CREATE TABLE early_rows (id int PRIMARY KEY)", "INSERT INTO early_rows VALUES (1)"])
    states: list[str] = []
    race.subscribe(lambda e: states.append(e.txn) if isinstance(e, SessionState) and e.session == "B" else None)
    await race.run("A", "BEGIN")
    await race.run("A", "SELECT id FROM early_rows WHERE id = 1 FOR UPDATE")
    nowait = "SELECT id FROM early_rows WHERE id = 1 FOR UPDATE NOWAIT"
    # None: told early when the error came before the server's ReadyForQuery, in one
    # read with it otherwise (the server's timing decides)
    cases = [
        (nowait, "refused", None, "idle"),
        ("SET lock_timeout = '30ms'", "ok", False, "idle"),
        ("SELECT id FROM early_rows WHERE id = 1 FOR UPDATE", "timed_out", None, "idle"),
        ("SELECT 1; " + nowait, "refused", False, "idle"),  # a result came first
        ("BEGIN", "ok", False, "in transaction"),
        (nowait, "refused", False, "failed transaction"),  # the state changes: read back first
        ("ROLLBACK", "ok", False, "idle"),
    ]
    for sql, outcome, early, txn in cases:
        stmt = race.submit("B", sql)
        await stmt.answered.wait()
        assert stmt.result.outcome == outcome, (sql, stmt.result.message)
        assert early is None or stmt.told_early == early, sql
        await race.settled("B")
        assert race.sessions["B"].txn == txn, sql
        assert states[-1] == txn, sql
    assert len(states) == len(cases)  # one state per statement
    await race.run("A", "ROLLBACK")


async def _com_do(race, name: str) -> int:
    res = await race.run(name, "SHOW SESSION STATUS LIKE 'Com_do'")
    return int(res.rows[0][1])


async def test_mariadb_never_reads_the_state_back_after_an_error(mysql_backend, make_race):
    """An error packet carries no status flags.  The state after a lock error is worked
    out from what the server does on it (a refusal leaves the transaction open, a
    deadlock rolls it back), never read back with a statement of lockrace's on the
    session's connection: the server's own Com_do counter shows no ``DO 0``."""
    race = await make_race(mysql_backend, ("A", "B"))
    await mysql_backend.run_admin(["CREATE TABLE early_rows (id int PRIMARY KEY) ENGINE=InnoDB",
                                   "INSERT INTO early_rows VALUES (1), (2)"])
    await race.run("A", "BEGIN")
    await race.run("A", "SELECT id FROM early_rows WHERE id = 1 FOR UPDATE")
    nowait = "SELECT id FROM early_rows WHERE id = 1 FOR UPDATE NOWAIT"
    before = await _com_do(race, "B")
    res = await race.run("B", nowait)
    assert res.outcome == "refused"
    await race.settled("B")
    assert race.sessions["B"].txn == "idle"
    await race.run("B", "BEGIN")
    await race.run("B", "SELECT id FROM early_rows WHERE id = 2 FOR UPDATE")
    res = await race.run("B", nowait)
    assert res.outcome == "refused"
    await race.settled("B")
    assert race.sessions["B"].txn == "in transaction"
    # a deadlock: B waits for A's row 1, A then wants B's row 2; InnoDB rolls one back whole
    waiting = race.submit("B", "SELECT id FROM early_rows WHERE id = 1 FOR UPDATE")
    await race.wait_blocked_or_done(waiting, 5)
    res_a = await race.run("A", "SELECT id FROM early_rows WHERE id = 2 FOR UPDATE")
    await race.settled("B")
    res_b = waiting.result
    victim = "A" if res_a.code == "1213" else "B"
    assert {res_a.code, res_b.code} >= {"1213"}, (res_a.code, res_b.code)
    assert race.sessions[victim].txn == "idle"
    assert race.sessions["B" if victim == "A" else "A"].txn == "in transaction"
    assert await _com_do(race, "B") == before  # nothing was read back on B's connection
    await race.run("B", "ROLLBACK")
    await race.run("A", "ROLLBACK")


# ---------------------------------------------------------------- MariaDB/MySQL


def _peek_whole(conn, sql: str) -> bytes:
    """Send ``sql`` on a PyMySQL connection, wait for the server's whole answer, and
    return its bytes as they sit in the socket (peeked: the answer is then read as
    usual, so the connection stays in step)."""
    import socket

    from pymysql.constants import COMMAND

    conn._execute_command(COMMAND.COM_QUERY, sql.encode())
    buf, quiet = b"", 0
    while quiet < 5:  # no new byte for 5 looks in a row: the server has said all
        time.sleep(0.02)
        now = conn._sock.recv(1 << 20, socket.MSG_PEEK)
        quiet = quiet + 1 if now == buf else 0
        buf = now
    try:
        conn._read_query_result()
        while conn._result is not None and conn._result.has_next:
            conn.next_result()
    except Exception:
        pass  # an error answer
    return buf


def test_mariadb_whole_answers_are_told_from_the_servers_own_bytes(mysql_server, mysql_backend):
    """Which answers the event loop may read itself: the bytes are MariaDB's own,
    and every cut-off prefix of a whole answer is not whole."""
    import pymysql
    from pymysql.constants import CLIENT

    from lockrace.backends.mysql_answer import whole_answer

    conn = pymysql.connect(**mysql_server.mysql_kwargs, client_flag=CLIENT.MULTI_STATEMENTS, autocommit=True)
    try:
        cases = [
            ("DO 1", True),  # OK
            ("SELECT 1 AS one, 'two' AS two", True),  # one row
            ("SELECT NULL", True),  # a row starting with NULL (0xfb)
            ("SELECT 1 FROM DUAL WHERE 1 = 0", True),  # no rows
            ("SELECT no_such_column", True),  # an error
            (series_sql(mysql_backend.flavor, 300), True),  # several packets of rows
            ("SELECT CAST('x' AS SIGNED)", False),  # a warning: read back on the thread
            ("SELECT 1; SELECT 2", False),  # more results
            ("DO 1; DO 2", False),
        ]
        for sql, whole in cases:
            buf = _peek_whole(conn, sql)
            assert buf, sql
            assert whole_answer(buf) is whole, (sql, buf[:40])
            if whole:
                cuts = range(1, len(buf)) if len(buf) < 200 else range(1, len(buf), 7)
                assert not any(whole_answer(buf[:cut]) for cut in cuts), sql
    finally:
        conn.close()


def _count_thread_calls(race, name: str) -> list:
    """Every call the session hands to its thread, by function name (the answer
    path's own seam: which answers the loop read itself)."""
    session = race.sessions[name].conn
    worker = session.thread()
    calls: list[str] = []
    submit = worker.submit

    def counted(fn, *args):
        calls.append(fn.__name__)
        return submit(fn, *args)

    worker.submit = counted
    return calls


async def test_mariadb_short_answers_are_read_on_the_loop(mysql_backend, make_race):
    """A refusal, a command's OK and a few rows reach the caller with no trip through
    the session's thread; rows streaming in, warnings and a long statement go through
    it (nothing is read back on the session's connection: not its state, not its budgets).  Every statement is started,
    finished and followed by the session's state once, whichever way it went."""
    await _short_answers_on_the_loop(mysql_backend, make_race)


@pytest.fixture(scope="module")
def mysql_tcp_server():
    """A private MySQL-family server of this module's own on a loopback port, where a
    MySQL server offers TLS (with the certificates it made itself) and PyMySQL takes it."""
    from lockrace.servers.private_mysql import PrivateMySQL
    from lockrace.servers.target import Target

    server = PrivateMySQL(tcp=True)
    server.start()
    try:
        yield Target("mysql", "private", mysql_kwargs=server.connect_kwargs(), server=server)
    finally:
        server.stop()


async def test_short_answers_over_tcp_and_tls_are_read_on_the_loop(mysql_tcp_server, make_race):
    """The same over TCP, which is TLS on MySQL: an SSLSocket takes no flags to its reads
    and keeps decrypted bytes its socket no longer shows; the loop reads those answers
    itself all the same, and nothing hangs."""
    import ssl

    from lockrace.backends import open_backend

    backend = await open_backend(mysql_tcp_server)  # (the server goes at the module's end)
    race = await make_race(backend, ("A", "B"))
    tls = isinstance(race.sessions["B"].conn.conn._sock, ssl.SSLSocket)
    assert tls == (backend.flavor == "mysql8"), type(race.sessions["B"].conn.conn._sock)
    await _short_answers_on_the_loop(backend, make_race, race)


async def _short_answers_on_the_loop(mysql_backend, make_race, race=None):
    race = race or await make_race(mysql_backend, ("A", "B"))
    await mysql_backend.run_admin(["CREATE TABLE loop_rows (id int PRIMARY KEY) ENGINE=InnoDB",
                                   "INSERT INTO loop_rows VALUES (1)"])
    await race.run("A", "BEGIN")
    await race.run("A", "SELECT id FROM loop_rows WHERE id = 1 FOR UPDATE")
    calls = _count_thread_calls(race, "B")
    events: list = []
    race.subscribe(lambda e: events.append(e) if e.session == "B" else None)
    nowait = "SELECT id FROM loop_rows WHERE id = 1 FOR UPDATE NOWAIT"
    steps = [  # sql, outcome, what the thread was asked to do
        (nowait, "refused", []),
        ("SELECT 1 AS one", "ok", []),
        ("DO 1", "ok", []),
        (series_sql(mysql_backend.flavor, 50000), "ok", ["execute_blocking"]),  # streams: the thread reads it
        ("SELECT CAST('x' AS SIGNED)", "ok", ["execute_blocking"]),  # a warning: the thread reads the answer
        ("SET SESSION innodb_lock_wait_timeout = 1", "ok", []),  # the budget follows the SET: nothing read back
        ("SELECT id FROM loop_rows WHERE id = 1 FOR UPDATE", "timed_out", []),
        ("BEGIN", "ok", []),
        (nowait, "refused", []),  # in a transaction: the state after the error is known, not read back
        ("SELECT no_such_column", "error", []),
        ("ROLLBACK", "ok", []),
        ("SELECT '" + "x" * 5000 + "' AS long_text", "ok", ["execute_blocking"]),  # long: sent by the thread
    ]
    for sql, outcome, thread in steps:
        del calls[:]
        res = await race.run("B", sql)
        await race.settled("B")
        assert res.outcome == outcome, (sql[:40], res.outcome, res.message)
        assert calls == thread, (sql[:40], calls)
    assert race.sessions["B"].txn == "idle"
    rows = series_sql(mysql_backend.flavor, 50000)
    big = next(e.result for e in events if isinstance(e, StatementFinished) and e.sql == rows)
    assert (big.total_rows, len(big.rows)) == (50000, 200)
    one = next(e.result for e in events if isinstance(e, StatementFinished) and e.sql == "SELECT 1 AS one")
    assert (one.columns, one.rows) == (["one"], [("1",)])
    warned = next(e.result for e in events if isinstance(e, StatementFinished) and "CAST" in e.sql)
    assert warned.notices == ["1 warning (SHOW WARNINGS lists it)"], warned.notices
    timed = next(e.result for e in events if isinstance(e, StatementFinished) and e.result.outcome == "timed_out")
    assert timed.elapsed_ns / 1e6 >= 900  # innodb_lock_wait_timeout = 1: about a second, timed to its arrival
    kinds = [type(e).__name__ for e in events if isinstance(e, (StatementStarted, StatementFinished, SessionState))]
    assert kinds == ["StatementStarted", "StatementFinished", "SessionState"] * len(steps), kinds
    states = [e.txn for e in events if isinstance(e, SessionState)]
    assert states == ["idle"] * 7 + ["in transaction"] * 3 + ["idle"] * 2
    await race.run("A", "ROLLBACK")
