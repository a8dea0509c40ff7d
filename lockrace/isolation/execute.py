"""Run one isolation spec on a backend: a clean place, connections, runner."""

from __future__ import annotations

import asyncio
import contextlib
from concurrent.futures import ThreadPoolExecutor

from ..registry import Family
from ..scenario.model import Scenario
from .runner import POLL_INTERVAL, SpecRunner


async def run_spec(spec: Scenario, backend, emit, step_timeout: float = 300.0, poll: float = POLL_INTERVAL,
                   more_coming: int = 0) -> bool:
    """Run every permutation of ``spec``; the transcript goes to ``emit(bytes)``.

    False when the spec was aborted (as isolationtester exits).  ``more_coming``:
    how many specs will follow on this backend (PostgreSQL then prepares their
    databases in the background); call ``finish()`` when done."""
    return await _RUNNERS[backend.family](spec, backend, emit, step_timeout, poll, more_coming)


async def finish() -> None:
    """Drop databases prepared ahead for specs that did not come."""
    from .databases import close_places

    await close_places()


async def _run_pg(spec, backend, emit, step_timeout, poll, more_coming) -> bool:
    from .databases import pg_place
    from .pg import PgControl, PgSession

    place = pg_place(backend)
    await place.prepare(spec.name, more_coming)

    async def opener(name: str, counted: bool):
        session = await PgSession.open(place.session_conninfo(spec.name, name), name, emit, counted)
        return session if counted else PgControl(session)

    try:
        return await SpecRunner(spec, opener, emit, step_timeout, poll).run()
    finally:
        await place.release()


async def _run_mysql(spec, backend, emit, step_timeout, poll, more_coming=0) -> bool:
    # (each spec's sandbox is made as it comes: nothing to prepare ahead for ``more_coming``)
    from .mysql import MyControl, MySession, connect

    kwargs = dict(backend.target.mysql_kwargs)
    owned = backend.target.owned
    database = "lockrace_isolation" if owned else backend.sandbox
    pool = ThreadPoolExecutor(max_workers=len(spec.sessions) + 2, thread_name_prefix="lockrace-spec")
    loop = asyncio.get_running_loop()

    def admin(statements: list[str]) -> None:
        conn = connect(kwargs, None)
        try:
            cur = conn.cursor()
            for text in statements:
                cur.execute(text)
        finally:
            conn.close()

    if owned:
        await loop.run_in_executor(pool, admin, [f"DROP DATABASE IF EXISTS `{database}`",
                                                 f"CREATE DATABASE `{database}` CHARACTER SET utf8mb4"])
    else:
        await backend.reset_sandbox()

    def kill(pid: int) -> bool:
        """Ask the server to end ``pid``'s statement, from a worker thread (a connection
        is opened for it: never on the event loop); the step's own wait sees the result."""
        def run() -> None:
            with contextlib.suppress(Exception):
                admin([f"KILL QUERY {int(pid)}"])

        pool.submit(run)
        return True

    monitor = None
    xids: set[str] = set()  # XA transactions the spec's sessions prepared and did not end

    async def opener(name: str, counted: bool):
        nonlocal monitor
        conn = await loop.run_in_executor(pool, connect, kwargs, database)
        session = MySession(conn, name, pool, kill, xids)
        if counted:
            return session
        monitor = await backend.connect_monitor()
        return MyControl(session, monitor)

    try:
        return await SpecRunner(spec, opener, emit, step_timeout, poll).run()
    finally:
        if monitor is not None:
            await monitor.close()
        try:
            if owned:
                def end_xa_and_drop() -> None:
                    for xid in sorted(xids):  # they outlive their connection and keep their locks
                        with contextlib.suppress(Exception):
                            admin([f"XA ROLLBACK {xid}"])
                    admin([f"DROP DATABASE IF EXISTS `{database}`"])

                await loop.run_in_executor(pool, end_xa_and_drop)
            else:
                backend.prepared_xa.update(xids)  # the sandbox reset rolls them back first
                await backend.reset_sandbox()
        finally:
            pool.shutdown(wait=False)


# each family's way to run a spec: PostgreSQL's own databases per spec, or the MySQL
# family's sandbox
_RUNNERS = {Family.POSTGRES: _run_pg, Family.MYSQL: _run_mysql}
