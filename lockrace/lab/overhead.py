"""Engine overhead as a caller sees it: the same refusals and bounded waits
measured through lockrace's engine (the caller's wall around ``Race.run``,
which returns with the server's answer; the wall until ``Race.settled``, once
the session is free again: the server's ReadyForQuery read, the events told,
a refusal's holder named, a further question to the server the bare driver
does not ask; and the statement's own ``elapsed_ns``, send to answer)
and through the bare driver (psycopg / PyMySQL, perf_counter_ns around
cursor.execute), interleaved in one run.  The target is on what the caller
waits for the answer: the engine's ``Race.run`` median <= the bare driver's
median + 0.1 ms.

Session H of the race holds row 1 for the whole bench; each waiter asks for
it with NOWAIT (refused at once) and with a 100 ms lock_timeout (PostgreSQL)
or innodb_lock_wait_timeout = 1 (the MySQL family's smallest budget).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from dataclasses import dataclass, field
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any, Callable

from ..backends.base import Backend
from ..dialects import family_dialect
from ..registry import Family
from ..engine.race import Race
from ..servers.target import Target, pg_options
from .holder_waiter import ERROR_OUTCOMES, setup_sql
from .modes import HOLD_SQL, TABLE, LabError
from .stats import Summary, summarize

if TYPE_CHECKING:
    import psycopg

CALLER_SLACK_MS = 0.1  # target: what a caller of Race.run waits <= the bare driver + 0.1 ms

WAYS = ("raw", "engine_wall", "engine_settled", "raw_async", "engine")
WAY_LABELS = {
    "raw": "raw driver",
    "raw_async": "raw driver, AsyncConnection",
    "engine": "lockrace, the statement's own time (elapsed_ns)",
    "engine_wall": "lockrace, what the caller waits (Race.run)",
    "engine_settled": "lockrace, until the session is free again",
}


@dataclass(frozen=True)
class Case:
    key: str  # nowait | bounded
    label: str
    sql: str
    setup: str = ""  # session-level budget for both waiters
    reset: str = ""
    budget_ms: float | None = None


@dataclass
class CaseResult:
    case: Case
    waits: dict[str, list[float]] = field(default_factory=lambda: {w: [] for w in WAYS})
    errors: dict[str, int] = field(default_factory=lambda: {w: 0 for w in WAYS})

    def summary(self, way: str) -> Summary:
        return summarize(self.waits[way], self.errors[way])

    @property
    def target_ms(self) -> float:
        """What a caller may wait: the bare driver's median + 0.1 ms."""
        return self.summary("raw").median_ms + CALLER_SLACK_MS

    def overhead_ms(self) -> float:
        """What the caller waits beyond the bare driver (medians)."""
        return self.summary("engine_wall").median_ms - self.summary("raw").median_ms

    def met(self, way: str = "engine_wall") -> bool:
        return self.summary(way).median_ms <= self.target_ms


@dataclass
class OverheadResult:
    engine: str
    flavor: str
    server_name: str
    server_version: str
    runs: int
    warmup: int
    driver: str
    transport: str = ""  # how both ways reach the server (the same for both, or each said)
    cases: dict[str, CaseResult] = field(default_factory=dict)

    def targets_met(self) -> bool:
        return all(c.met("engine_wall") for c in self.cases.values())


def transport_of(conn: Any) -> str:
    """How a psycopg or PyMySQL connection reaches its server: a Unix socket, TCP,
    or TLS with its protocol and cipher (a TLS read costs more than a plain one)."""
    pgconn = getattr(conn, "pgconn", None)
    if pgconn is not None:  # psycopg
        if pgconn.ssl_in_use:
            proto, cipher = (pgconn.ssl_attribute(k) or b"" for k in (b"protocol", b"cipher"))
            return f"TLS ({proto.decode()} {cipher.decode()})"
        return "Unix socket" if (conn.info.host or "").startswith("/") else "TCP"
    sock = getattr(conn, "_sock", None)  # PyMySQL
    if sock is None:
        return "closed"
    if isinstance(sock, ssl.SSLSocket):
        cipher = sock.cipher()
        return f"TLS ({sock.version()} {cipher[0]})" if cipher else "TLS"
    return "Unix socket" if sock.family == socket.AF_UNIX else "TCP"


def cases_for(engine: str) -> list[Case]:
    """NOWAIT, and the shortest row-lock budget the server takes (100 ms; 1 s where it
    takes whole seconds)."""
    row1 = f"SELECT id FROM {TABLE} WHERE id = 1 FOR UPDATE"
    dialect = family_dialect(engine)
    setting = dialect.row_lock_setting
    ms = 1000.0 if dialect.row_lock_whole_seconds else 100.0
    label = f"{setting}={ms / 1000:g}" if dialect.row_lock_whole_seconds else f"{setting}={ms:g}ms"
    bounded = Case("bounded", label, row1, dialect.set_sql(setting, ms), dialect.reset_sql(setting), ms)
    return [Case("nowait", "FOR UPDATE NOWAIT", row1 + " NOWAIT"), bounded]


class RawWaiter:
    """A bare driver connection, timed around cursor.execute."""

    def __init__(self, backend: Backend, target: Target):
        self.target = target
        self.conn: Any = None  # a psycopg or a PyMySQL connection (DB-API: cursor, close)
        self._driver, self._connect = _RAW_DRIVERS[backend.family]

    @property
    def driver(self) -> str:
        return self._driver()

    def connect(self) -> None:
        self.conn = self._connect(self.target)

    def execute(self, sql: str) -> tuple[float, bool]:
        """(ms around the driver call, whether the server answered with an error)"""
        cur = self.conn.cursor()
        failed = False
        t0 = perf_counter_ns()
        try:
            cur.execute(sql)
        except Exception as exc:  # the lock error we came for (checked by the caller via counts)
            t1 = perf_counter_ns()
            failed = True
            if not _is_lock_error(exc):
                raise LabError(f"raw driver: {sql}: {exc}") from None
        else:
            t1 = perf_counter_ns()
            if cur.description is not None:
                cur.fetchall()
        cur.close()
        return (t1 - t0) / 1e6, failed

    def close(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(Exception):
                self.conn.close()


class AsyncRawWaiter:
    """psycopg's AsyncConnection without lockrace: separates what the engine
    costs from what async I/O costs (PostgreSQL only; PyMySQL has no async)."""

    def __init__(self, target: Target):
        self.target = target
        self.conn: psycopg.AsyncConnection | None = None

    async def connect(self) -> None:
        import psycopg

        self.conn = await psycopg.AsyncConnection.connect(
            self.target.conninfo, autocommit=True, options=pg_options(self.target.conninfo, f"-c search_path={self.target.sandbox}"))

    async def execute(self, sql: str) -> tuple[float, bool]:
        assert self.conn is not None, "connect() first"
        cur = self.conn.cursor()
        failed = False
        t0 = perf_counter_ns()
        try:
            await cur.execute(sql)
        except Exception as exc:
            t1 = perf_counter_ns()
            failed = True
            if not _is_lock_error(exc):
                raise LabError(f"raw async driver: {sql}: {exc}") from None
        else:
            t1 = perf_counter_ns()
        await cur.close()
        return (t1 - t0) / 1e6, failed

    async def close(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(Exception):
                await self.conn.close()


def _psycopg() -> str:
    import psycopg

    return f"psycopg {psycopg.__version__} (sync connection)"


def _psycopg_connect(target: Target) -> Any:
    import psycopg

    return psycopg.connect(target.conninfo, autocommit=True,
                           options=pg_options(target.conninfo, f"-c search_path={target.sandbox}"))


def _pymysql() -> str:
    import pymysql

    return f"PyMySQL {pymysql.__version__}"


def _pymysql_connect(target: Target) -> Any:
    import pymysql

    return pymysql.connect(**target.mysql_kwargs, database=target.sandbox, autocommit=True)


# each family's bare driver: (its name and version, a connection in the sandbox)
_RAW_DRIVERS: dict[str, tuple[Callable[[], str], Callable[[Target], Any]]] = {
    Family.POSTGRES: (_psycopg, _psycopg_connect),
    Family.MYSQL: (_pymysql, _pymysql_connect),
}
# the bare async driver, where the family has one (PyMySQL has none)
_ASYNC_RAW: dict[str, type[AsyncRawWaiter]] = {Family.POSTGRES: AsyncRawWaiter}


def _is_lock_error(exc: Exception) -> bool:
    args = getattr(exc, "args", ())
    if args and isinstance(args[0], int):  # PyMySQL: (errno, message)
        return args[0] in (1205, 3572)
    return getattr(exc, "sqlstate", None) == "55P03"  # psycopg


class OverheadBench:
    def __init__(self, backend: Backend, target: Target, runs: int = 30, warmup: int = 3):
        self.backend = backend
        self.target = target
        self.runs = runs
        self.warmup = warmup

    async def run(self, progress: Callable[[str, int, int], None] | None = None) -> OverheadResult:
        backend = self.backend
        await backend.run_admin(setup_sql(backend.family))
        raw = RawWaiter(backend, self.target)
        result = OverheadResult(backend.family, backend.flavor, backend.server_name, backend.version,
                                self.runs, self.warmup, raw.driver)
        async_raw = _ASYNC_RAW.get(backend.family)
        araw = async_raw(self.target) if async_raw is not None else None
        race = await Race(backend, ["H", "W"]).open()
        try:
            await asyncio.to_thread(raw.connect)
            if araw is not None:
                await araw.connect()
            ways = transport_of(raw.conn), transport_of(getattr(race.sessions["W"].conn, "conn", None))
            result.transport = ways[0] if ways[0] == ways[1] else f"raw driver: {ways[0]}, lockrace: {ways[1]}"
            await _must(race, "H", "BEGIN")
            await _must(race, "H", HOLD_SQL)
            cases = cases_for(backend.family)
            total = len(cases) * (self.runs + self.warmup)
            done = 0
            for case in cases:
                cr = CaseResult(case)
                if case.setup:
                    await _must(race, "W", case.setup)
                    raw.execute(case.setup)
                    if araw is not None:
                        await araw.execute(case.setup)
                for i in range(self.warmup + self.runs):
                    counted = i >= self.warmup
                    order = ["raw", "engine"] + (["raw_async"] if araw is not None else [])
                    for way in order[i % len(order):] + order[: i % len(order)]:
                        if way in ("raw", "raw_async"):
                            if way == "raw":
                                ms, failed = raw.execute(case.sql)
                            else:
                                assert araw is not None  # raw_async is in the order only then
                                ms, failed = await araw.execute(case.sql)
                            if counted:
                                cr.waits[way].append(ms)
                                cr.errors[way] += failed
                        else:
                            t0 = perf_counter_ns()
                            res = await race.run("W", case.sql)
                            wall = (perf_counter_ns() - t0) / 1e6
                            await race.settled("W")  # a refusal's holder, asked after the answer
                            settled = (perf_counter_ns() - t0) / 1e6
                            if res.outcome not in ERROR_OUTCOMES and res.outcome != "ok":
                                raise LabError(f"engine: {case.sql}: {res.outcome} {res.message}")
                            if counted:
                                err = res.outcome in ERROR_OUTCOMES
                                cr.waits["engine"].append(res.elapsed_ns / 1e6)
                                cr.waits["engine_wall"].append(wall)
                                cr.waits["engine_settled"].append(settled)
                                cr.errors["engine"] += err
                                cr.errors["engine_wall"] += err
                                cr.errors["engine_settled"] += err
                    done += 1
                    if progress is not None:
                        progress(case.label, done, total)
                if case.reset:
                    await _must(race, "W", case.reset)
                    raw.execute(case.reset)
                    if araw is not None:
                        await araw.execute(case.reset)
                result.cases[case.key] = cr
        finally:
            raw.close()
            if araw is not None:
                await araw.close()
            await race.close()
            with contextlib.suppress(Exception):
                await backend.run_admin([f"DROP TABLE IF EXISTS {TABLE}"])
        return result


async def _must(race: Race, name: str, sql: str):
    res = await race.run(name, sql)
    if res.failed:
        raise LabError(f"session {name}: {sql}: {res.code} {res.message}")
    return res
