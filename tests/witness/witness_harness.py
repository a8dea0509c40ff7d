"""A differential harness: the same steps through lockrace and through raw driver
connections, compared statement by statement.

A *case* is setup SQL plus a list of steps (session letter + SQL).  It runs

1. through lockrace: a ``Race`` on the backend, its steps launched by the engine's
   ``Scheduler`` (built-in scenarios: by ``ScenarioRunner``, as ``lockrace run`` does);
2. through raw driver connections, one thread per session (libpq through psycopg's
   ``pgconn`` for PostgreSQL, PyMySQL for MariaDB), launched under the same rule:
   after a step is sent, wait until it is answered or the *server* reports it
   waiting for a lock (asked on a connection of the harness's own), then go on; a
   session's earlier step is waited for before its next one is sent.

What is compared, per statement: each result set's command tag (PostgreSQL) or
affected-row count (MariaDB), the rows returned (the server's text), the error's
SQLSTATE / errno, MariaDB's warning count; and the final contents of every table
and sequence of the sandbox.  What legitimately differs (a backend pid, a time) is
left out by the case itself, step by step, with the reason (``Step.ignore``).
"""

from __future__ import annotations

import asyncio
import queue
import select
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field

import psycopg
import pymysql
from psycopg import pq
import pymysql.constants
from pymysql.constants import CLIENT

from lockrace.core.events import ROW_LIMIT, StatementResult
from lockrace.engine.race import Race
from lockrace.engine.runner import ScenarioRunner
from lockrace.engine.scheduler import Scheduler
from lockrace.scenario import model

STEP_TIMEOUT = 10.0
BLOCK_POLL_S = 0.005


# ----------------------------------------------------------------- cases

@dataclass
class Step:
    session: str
    sql: str
    ignore: dict[str, str] = field(default_factory=dict)
    """What of this statement's answer is not compared, each with its reason:
    "rows" (values that differ run to run: a pid, a time, an unseeded RAND()),
    "tag"."""


@dataclass
class Case:
    name: str
    setup: list[str]
    steps: list[Step]

    @property
    def sessions(self) -> list[str]:
        names: list[str] = []
        for st in self.steps:
            if st.session not in names:
                names.append(st.session)
        return names


@dataclass
class Answer:
    """One statement's answer, as compared: result sets (tag or affected rows, rows or
    None), the error code (or None), MariaDB's warning count."""

    sets: list[tuple]
    error: str | None = None
    warnings: int = 0
    notices: tuple[str, ...] = ()  # PostgreSQL's notices and warnings ("WARNING:  ..."), in order
    txn: str | None = None
    """The session's transaction state after it, as the protocol says (libpq's status;
    MariaDB's status flags, which an error packet does not carry: None then).  lockrace
    shows it in the panel; compared where both sides know it."""

    def masked(self, ignore: dict[str, str]) -> "Answer":
        sets = [(None if "tag" in ignore else tag, None if "rows" in ignore and rows is not None else rows)
                for tag, rows in self.sets]
        return Answer(sets, self.error, self.warnings, () if "notices" in ignore else self.notices, self.txn)

    def __eq__(self, other) -> bool:
        if not isinstance(other, Answer):
            return NotImplemented
        same_txn = self.txn is None or other.txn is None or self.txn == other.txn
        return (self.sets, self.error, self.warnings, self.notices) == \
            (other.sets, other.error, other.warnings, other.notices) and same_txn


@dataclass
class Outcome:
    answers: list[Answer]
    tables: dict[str, list]


# ------------------------------------------------------ lockrace's answers

def lockrace_answer(result: StatementResult | None, engine: str, txn: str = "") -> Answer:
    if result is None:
        return Answer([], error="no answer")
    sets = []
    # an answer that is no server's result (the connection was lost, a driver failure) has no result set
    failed = result.outcome in ("connection_lost", "error", "cancelled") and not result.code
    for r in (result.result_sets if failed else result.succeeded):
        rows = [tuple(row) for row in r.rows] if r.has_rows else None
        if engine == "postgres":
            sets.append((r.tag, rows))
        else:
            sets.append((r.rowcount, rows))  # affected rows, or rows returned in all
    if result.code:
        error = result.code if engine == "postgres" else f"{result.code}/{result.sqlstate}"
    elif result.outcome == "connection_lost":
        error = "connection lost"
    elif result.outcome in ("error", "cancelled"):
        error = f"lockrace: {result.outcome}: {result.message}"
    else:
        error = None
    warnings = 0
    if engine != "postgres" and not result.code:
        for note in result.notices:
            word = note.split(" ", 1)[0]
            if note.split(" ")[1:2] and note.split(" ")[1].startswith("warning") and word.isdigit():
                warnings = int(word)
    notices = tuple(n for n in result.notices if not n.startswith("Asynchronous notification")) \
        if engine == "postgres" else ()
    known = txn and (engine == "postgres" or error is None)
    return Answer(sets, error, warnings, notices, txn if known else None)


# --------------------------------------------------------------- raw sessions

class RawSession:
    """One raw connection with a thread of its own that runs its statements."""

    def __init__(self, engine: str, conn, name: str):
        self.engine, self.conn, self.name = engine, conn, name
        self.ident = conn.pgconn.backend_pid if engine == "postgres" else conn.thread_id()
        self.jobs: queue.Queue = queue.Queue()
        self.thread = threading.Thread(target=self._work, name=f"raw-{name}", daemon=True)
        self.thread.start()

    def _work(self) -> None:
        while True:
            job = self.jobs.get()
            if job is None:
                return
            sql, fut = job
            try:
                fut.set_result(self._run(sql))
            except BaseException as exc:  # noqa: BLE001 - handed to the harness
                fut.set_exception(exc)

    def submit(self, sql: str) -> Future:
        fut: Future = Future()
        fut.sent_at = time.monotonic()  # what the server says of this statement is news from then on
        self.jobs.put((sql, fut))
        return fut

    def _run(self, sql: str) -> Answer:
        return _pg_run(self.conn, sql) if self.engine == "postgres" else _my_run(self.conn, sql)

    def close(self) -> None:
        self.jobs.put(None)
        self.thread.join(5)
        try:
            self.conn.close()
        except Exception:
            pass


def _pg_run(conn: psycopg.Connection, sql: str) -> Answer:
    """The simple query protocol, straight on libpq, as psql sends a line."""
    pgconn = conn.pgconn
    notices: list[str] = []
    conn._witness_notices = notices  # filled by the connection's notice handler (see RawRace._connect)
    if pgconn.status != pq.ConnStatus.OK:
        return Answer([], error="connection lost")
    pgconn.send_query(sql.encode())
    while pgconn.flush():
        select.select([], [pgconn.socket], [], 1.0)
    sets, error = [], None
    while True:
        try:
            while pgconn.is_busy():
                select.select([pgconn.socket], [], [], 1.0)
                pgconn.consume_input()
        except psycopg.OperationalError:
            pass  # the server closed the connection: what it said before is in the results
        res = pgconn.get_result()
        if res is None:
            break
        status = res.status
        if status == pq.ExecStatus.TUPLES_OK:
            rows = [tuple(None if res.get_value(r, c) is None else res.get_value(r, c).decode()
                          for c in range(res.nfields)) for r in range(min(res.ntuples, ROW_LIMIT))]
            sets.append(((res.command_status or b"").decode(), rows))
        elif status in (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.EMPTY_QUERY):
            sets.append(((res.command_status or b"").decode(), None))
        elif error is None:
            code = res.error_field(pq.DiagnosticField.SQLSTATE)
            error = code.decode() if code else "connection lost"
    if pgconn.status != pq.ConnStatus.OK and error is None:
        error = "connection lost"
    return Answer(sets, error, notices=tuple(notices), txn=_PG_TXN.get(pgconn.transaction_status, "closed"))


_PG_TXN = {pq.TransactionStatus.IDLE: "idle", pq.TransactionStatus.INTRANS: "in transaction",
           pq.TransactionStatus.INERROR: "failed transaction"}


def _my_run(conn, sql: str) -> Answer:
    sets, error, warnings = [], None, 0
    cur = conn.cursor()
    try:
        cur.execute(sql)
        while True:
            if cur.description is not None:
                rows = [tuple(r) for r in cur.fetchall()]
                sets.append((len(rows), rows[:ROW_LIMIT]))
            else:
                sets.append((cur.rowcount, None))
            warnings = getattr(cur._result, "warning_count", 0) or 0
            if not cur.nextset():
                break
    except pymysql.err.OperationalError as exc:
        code = exc.args[0] if exc.args else None
        if code in (2006, 2013, 2014):
            return Answer(sets, error="connection lost")
        error = f"{code}/{_sqlstate(conn)}"
    except pymysql.MySQLError as exc:
        code = exc.args[0] if exc.args else None
        error = f"{code}/{_sqlstate(conn)}"
    finally:
        try:
            cur.close()
        except Exception:
            pass
    if error is not None:
        return Answer(sets, error)
    in_trans = bool(conn.server_status & pymysql.constants.SERVER_STATUS.SERVER_STATUS_IN_TRANS)
    return Answer(sets, error, warnings, txn="in transaction" if in_trans else "idle")


class _SqlstatePacket(pymysql.connections.MysqlPacket):
    """PyMySQL drops an error's SQLSTATE: keep it on the connection."""

    def raise_for_error(self):
        self.rewind()
        self.advance(1)
        self.read_uint16()  # the error number: the message says what happened
        state = "HY000"
        if self.read(1) == b"#":
            state = self.read(5).decode("ascii", "replace")
        self.rewind()
        _LAST_STATE[threading.get_ident()] = state
        super().raise_for_error()


_LAST_STATE: dict[int, str] = {}


def _sqlstate(conn) -> str:
    return _LAST_STATE.pop(threading.get_ident(), "HY000")


class _RawMyConnection(pymysql.connections.Connection):
    """PyMySQL, keeping what it drops: an error's SQLSTATE, and the status flags of the
    EOF packet that ends a result set (it keeps only an OK packet's): a SELECT that
    begins a transaction (autocommit off) says so only there."""

    def _read_packet(self, packet_type=pymysql.connections.MysqlPacket):
        if packet_type is pymysql.connections.MysqlPacket:
            packet_type = _SqlstatePacket
        packet = super()._read_packet(packet_type)
        data = packet.get_all_data()
        if data[:1] == b"\xfe" and 5 <= len(data) < 9:
            self.server_status = int.from_bytes(data[3:5], "little")
        return packet


# --------------------------------------------------------------- raw runs

class RawRace:
    """The raw side: a connection per session, a monitor of the harness's own that
    asks the server who waits for a lock, and the scheduler's launch rules."""

    def __init__(self, backend, names: list[str]):
        self.backend = backend
        self.engine = backend.family
        self._innodb_at, self._innodb_read, self._innodb_waiting = 0.0, 0.0, set()
        self.monitor = self._connect(monitor=True)
        self.sessions = {name: RawSession(self.engine, self._connect(), name) for name in names}

    def _connect(self, monitor: bool = False):
        target = self.backend.target
        if self.engine == "postgres":
            options = [] if monitor else [f"-c search_path={self.backend.sandbox}"]
            conn = psycopg.Connection.connect(target.conninfo, autocommit=True,
                                              application_name="witness-monitor" if monitor else "witness",
                                              options=" ".join(options))
            conn._witness_notices = []
            conn.add_notice_handler(lambda d, c=conn: c._witness_notices.append(
                f"{d.severity_nonlocalized or d.severity}:  {d.message_primary}"))
            return conn
        kwargs = dict(target.mysql_kwargs)
        if monitor:
            return pymysql.connect(**kwargs, autocommit=True)
        return _RawMyConnection(**kwargs, database=self.backend.sandbox, autocommit=True, conv={},
                                client_flag=CLIENT.MULTI_STATEMENTS, charset="utf8mb4")

    def session_for(self, name: str) -> RawSession:
        if name not in self.sessions:
            self.sessions[name] = RawSession(self.engine, self._connect(), name)
        return self.sessions[name]

    def waiting(self, ident: int, since: float = 0.0) -> bool | None:
        """Does the server report this backend waiting for a lock?  None: it cannot tell
        yet about a statement sent at ``since`` (MariaDB's InnoDB views are a snapshot)."""
        if self.engine == "postgres":
            others = [s.ident for s in self.sessions.values() if s.ident != ident]
            row = self.monitor.execute(
                "SELECT cardinality(pg_blocking_pids(%s)) > 0 OR pg_isolation_test_session_is_blocked(%s, %s::int[])",
                (ident, ident, others)).fetchone()
            return bool(row[0])
        cur = self.monitor.cursor()
        # InnoDB answers from a cache it refreshes only after 100 ms without a read:
        # asked more often, it would never show a wait that began after the first read
        # (and a snapshot read before the statement was sent says nothing about it)
        if time.monotonic() - self._innodb_read > 0.105:
            taken = time.monotonic()
            cur.execute("SELECT trx_mysql_thread_id FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'")
            self._innodb_waiting = {int(r[0]) for r in cur.fetchall()}
            self._innodb_at, self._innodb_read = taken, time.monotonic()
        cur.execute("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = %s"
                    " AND (STATE LIKE 'Waiting for%%lock%%' OR STATE = 'User lock')", (ident,))
        if cur.fetchone()[0]:
            return True  # a metadata lock or GET_LOCK(): the process list is read afresh each time
        if self._innodb_at < since:
            return None
        return ident in self._innodb_waiting

    def cancel(self, ident: int) -> None:
        if self.engine == "postgres":
            self.monitor.execute("SELECT pg_cancel_backend(%s)", (ident,))
        else:
            self.monitor.cursor().execute(f"KILL QUERY {int(ident)}")

    def done_or_waiting(self, session: RawSession, fut: Future, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if fut.done():
                return True
            if self.waiting(session.ident, fut.sent_at):
                return True
            time.sleep(BLOCK_POLL_S)
        return fut.done()

    def await_done(self, session: RawSession, fut: Future) -> Answer:
        try:
            return fut.result(STEP_TIMEOUT)
        except TimeoutError:
            self.cancel(session.ident)
            try:
                return fut.result(5)
            except TimeoutError:
                return Answer([], error="the cancel did not take")

    def close(self) -> None:
        for s in self.sessions.values():
            s.close()
        self.monitor.close()


def run_raw(backend, case: Case) -> list[Answer]:
    """The case's steps on raw connections, under the scheduler's rule for steps that
    state no expectations: answered or reported waiting, then the next step; a
    session's earlier step is waited for before its next one is sent."""
    raw = RawRace(backend, case.sessions)
    answers: list[Answer | None] = [None] * len(case.steps)
    pending: dict[int, tuple[RawSession, Future]] = {}
    try:
        for i, st in enumerate(case.steps):
            session = raw.session_for(st.session)
            for j, (s, fut) in list(pending.items()):
                if s is session:
                    answers[j] = raw.await_done(s, fut)
                    del pending[j]
            fut = session.submit(st.sql)
            pending[i] = (session, fut)
            if not raw.done_or_waiting(session, fut, STEP_TIMEOUT):
                answers[i] = raw.await_done(session, fut)
                del pending[i]
            _collect(raw, pending, answers, due=())
        for j, (s, fut) in list(pending.items()):
            answers[j] = raw.await_done(s, fut)
        return answers  # type: ignore[return-value]
    finally:
        raw.close()


def _collect(raw: RawRace, pending: dict, answers: list, due) -> None:
    """Steps that finished meanwhile; those due now; those the server no longer
    reports waiting (about to finish)."""
    for j, (s, fut) in list(pending.items()):
        if fut.done():
            answers[j] = fut.result()
            del pending[j]
    for j in due:
        if j in pending:
            s, fut = pending.pop(j)
            answers[j] = raw.await_done(s, fut)
    for j, (s, fut) in list(pending.items()):
        said = raw.waiting(s.ident, fut.sent_at)
        while said is None and not fut.done():
            time.sleep(BLOCK_POLL_S)
            said = raw.waiting(s.ident, fut.sent_at)
        if not said:
            answers[j] = raw.await_done(s, fut)
            del pending[j]


# ------------------------------------------------------------- the sandbox

def dump_tables(backend) -> dict[str, list]:
    """Every table's rows (as text, sorted) and every sequence's state in the sandbox."""
    out: dict[str, list] = {}
    if backend.family == "postgres":
        with psycopg.Connection.connect(backend.target.conninfo, autocommit=True) as conn:
            tables = conn.execute("SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n"
                                  " ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind IN ('r', 'S', 'p')"
                                  " ORDER BY 1", (backend.sandbox,)).fetchall()
            for name, kind in tables:
                ident = psycopg.sql.Identifier(backend.sandbox, name)
                if kind == "S":
                    q = psycopg.sql.SQL("SELECT last_value::text, is_called::text FROM {}").format(ident)
                else:
                    q = psycopg.sql.SQL("SELECT t::text FROM {} t ORDER BY 1").format(ident)
                out[name] = [tuple(r) for r in conn.execute(q).fetchall()]
        return out
    conn = pymysql.connect(**backend.target.mysql_kwargs, database=backend.sandbox, autocommit=True, conv={},
                           charset="utf8mb4")
    try:
        cur = conn.cursor()
        cur.execute("SELECT TABLE_NAME, TABLE_TYPE FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s"
                    " AND TABLE_TYPE IN ('BASE TABLE', 'SEQUENCE') ORDER BY 1", (backend.sandbox,))
        for name, _kind in cur.fetchall():
            cur.execute(f"SELECT * FROM `{name}`")
            out[name] = sorted((tuple(r) for r in cur.fetchall()), key=repr)
    finally:
        conn.close()
    return out


# ------------------------------------------------------------ lockrace runs

def _scenario_of(case: Case, engine: str) -> model.Scenario:
    steps = [model.Step(f"s{i}", st.session, st.sql) for i, st in enumerate(case.steps, start=1)]
    return model.Scenario(case.name, engines=[engine], setup={None: list(case.setup)}, steps=steps)


def hold_purge(backend):
    """MariaDB: a read view open on a connection of the harness's own, so that InnoDB's
    purge does not remove delete-marked rows while the steps run.  Whether a locking
    read meets such a row (and waits for or skips its lock) would otherwise depend on
    when the purge thread came round: on how fast either side ran, not on what it
    sent.  Closed (``release_purge``) before the tables are read."""
    if backend.family == "postgres":
        return None
    conn = pymysql.connect(**backend.target.mysql_kwargs, autocommit=True)
    conn.cursor().execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
    return conn


def release_purge(conn) -> None:
    if conn is not None:
        conn.close()


async def run_lockrace(backend, case: Case) -> Outcome:
    """The case through lockrace's engine: a Race and its Scheduler, each step
    launched as the scheduler launches a step that states no expectations."""
    scenario = _scenario_of(case, backend.family)
    race = await Race(backend, case.sessions).open()
    held = None
    try:
        scheduler = Scheduler(race, scenario, step_timeout=STEP_TIMEOUT, spec_rules=True)
        scheduler.attach()
        await scheduler.prepare()
        held = await asyncio.to_thread(hold_purge, backend)
        for index, step in enumerate(scheduler.scenario.steps, start=1):
            await scheduler.step(step, index)
        await scheduler.finish()
        scheduler.detach()
        records = scheduler.report.records
    finally:
        await race.close()
        await asyncio.to_thread(release_purge, held)
    answers = [lockrace_answer(rec.result, backend.family, rec.txn_after) for rec in records]
    return Outcome(answers, await asyncio.to_thread(dump_tables, backend))


async def run_raw_case(backend, case: Case) -> Outcome:
    await backend.reset_sandbox()
    await backend.run_admin(case.setup)
    held = await asyncio.to_thread(hold_purge, backend)
    try:
        answers = await asyncio.to_thread(run_raw, backend, case)
    finally:
        await asyncio.to_thread(release_purge, held)
    return Outcome(answers, await asyncio.to_thread(dump_tables, backend))


def differences(case: Case, ours: Outcome, raw: Outcome) -> list[str]:
    out = []
    for i, (st, a, b) in enumerate(zip(case.steps, ours.answers, raw.answers), start=1):
        a, b = a.masked(st.ignore), b.masked(st.ignore)
        if a != b:
            out.append(f"step {i} {st.session}> {st.sql}\n    lockrace: {a}\n    raw:      {b}")
    if len(ours.answers) != len(raw.answers):
        out.append(f"{len(ours.answers)} answers through lockrace, {len(raw.answers)} raw")
    if ours.tables != raw.tables:
        out.append(f"final tables\n    lockrace: {ours.tables}\n    raw:      {raw.tables}")
    return out


async def compare(backend, case: Case) -> list[str]:
    ours = await run_lockrace(backend, case)
    raw = await run_raw_case(backend, case)
    return differences(case, ours, raw)


# ------------------------------------------------------- built-in scenarios

async def run_scenario_lockrace(backend, scenario: model.Scenario) -> Outcome:
    """As ``lockrace run`` runs it: ScenarioRunner on a Race."""
    race = await Race(backend, scenario.session_names()).open()
    try:
        runner = ScenarioRunner(race, scenario, step_timeout=STEP_TIMEOUT)
        report = await runner.run()
    finally:
        await race.close()
    assert not report.setup_error, report.setup_error
    answers = [lockrace_answer(rec.result, backend.family, rec.txn_after) for rec in report.records]
    tables = await asyncio.to_thread(dump_tables, backend)
    await backend.run_admin(scenario.teardown_for(backend.flavor))
    return Outcome(answers, tables)


def run_scenario_raw(backend, scenario: model.Scenario) -> list[Answer]:
    """The scenario's steps on raw connections under ``lockrace run``'s rules: a step
    that expects to be left waiting (``completes-after``) is sent and the next one
    follows once the server reports it waiting; any other step is waited for; after
    each step, waiting steps due (``completes-after`` it) or no longer reported
    waiting are waited for."""
    flavor = backend.flavor
    scenario = scenario.for_flavor(flavor)
    raw = RawRace(backend, scenario.session_names())
    answers: list[Answer | None] = []
    pending: dict[int, tuple[RawSession, Future]] = {}
    try:
        for sdef in scenario.sessions:
            for sql in sdef.setup:
                raw.await_done(raw.session_for(sdef.name), raw.session_for(sdef.name).submit(sql))
        steps = [scenario.step(e.step) for e in scenario.order()[0]]
        for i, step in enumerate(steps):
            session = raw.session_for(step.session)
            answers.append(None)
            fut = session.submit(step.sql_for(flavor) or step.sql)
            pending[i] = (session, fut)
            if step.expects_blocking(flavor):
                raw.done_or_waiting(session, fut, STEP_TIMEOUT)
            else:
                answers[i] = raw.await_done(session, fut)
                del pending[i]
            due = []
            for j, (_s, _f) in pending.items():
                after = [e.value for e in steps[j].applicable(flavor) if e.key == "completes_after"]
                if after and i + 1 >= after[0]:
                    due.append(j)
            _collect(raw, pending, answers, due)
        for j, (s, fut) in list(pending.items()):
            answers[j] = raw.await_done(s, fut)
        return answers  # type: ignore[return-value]
    finally:
        raw.close()


async def compare_scenario(backend, scenario: model.Scenario, ignore: dict[int, dict[str, str]] | None = None
                           ) -> list[str]:
    ours = await run_scenario_lockrace(backend, scenario)
    await backend.reset_sandbox()
    await backend.run_admin(scenario.setup_for(backend.flavor))
    answers = await asyncio.to_thread(run_scenario_raw, backend, scenario)
    raw = Outcome(answers, await asyncio.to_thread(dump_tables, backend))
    await backend.run_admin(scenario.teardown_for(backend.flavor))
    flavor = backend.flavor
    sc = scenario.for_flavor(flavor)
    steps = [Step(sc.step(e.step).session, sc.step(e.step).sql_for(flavor) or sc.step(e.step).sql,
                  (ignore or {}).get(n, {})) for n, e in enumerate(sc.order()[0], start=1)]
    return differences(Case(scenario.name, [], steps), ours, raw)
