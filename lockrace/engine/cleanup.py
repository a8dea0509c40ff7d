"""Ending a race: cancel what runs, roll back what is open (prepared
transactions too), close every connection -- each step bounded in time, so
that a server that does not answer cannot hold it."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from ..backends.base import ConnectError

if TYPE_CHECKING:
    from .race import Race


async def close(race: Race, grace: float = 2.0) -> None:
    """See ``Race.close``."""
    closing = asyncio.ensure_future(_close(race, grace))
    cancelled = False
    while not closing.done():
        try:
            await asyncio.shield(closing)
        except asyncio.CancelledError:
            cancelled = True
    closing.result()
    if cancelled:
        raise asyncio.CancelledError


async def _close(race: Race, grace: float) -> None:
    race.watcher.stop_lost_probe()
    for s in race.sessions.values():
        if s.running is not None and s.running.task is None:
            race.statements.launch(s, s.running)  # a statement just sent: its task reads it to its end
    await race.watcher.stop(timeout=grace)
    running = [s for s in race.sessions.values() if s.running]
    for node in {s.node for s in running}:
        monitor = race.monitors.get(node, race.monitor)
        if monitor is not None and monitor.closed:
            await bounded(race.watcher.replace_monitor(node), grace)
    cancels = [m.cancel(s.ident) for s in running if (m := race.monitor_for(s)) is not None]
    if cancels:
        await bounded(asyncio.gather(*cancels, return_exceptions=True), grace)
    waits = [s.running.done.wait() for s in running if s.running and s.running.task]
    if waits:  # one grace period for all of them, not one each
        await bounded(asyncio.gather(*waits), grace)
    stuck = [s for s in race.sessions.values() if s.running]
    ends = [m.terminate(s.ident) for s in stuck if (m := race.monitor_for(s)) is not None]
    if ends:
        await bounded(asyncio.gather(*ends, return_exceptions=True), grace)
    await release_prepared(race, grace)
    rollbacks = [s.conn.execute("ROLLBACK") for s in race.sessions.values()
                 if not s.running and not s.conn.closed and s.txn != "idle"]
    if rollbacks:
        await bounded(asyncio.gather(*rollbacks, return_exceptions=True), grace)
    await bounded(asyncio.gather(*(s.conn.close() for s in race.sessions.values()), return_exceptions=True), grace)
    for s in race.sessions.values():
        if s.running and s.running.task:
            s.running.task.cancel()
    await bounded(race.watcher.close_monitors(), grace)


async def release_prepared(race: Race, timeout: float = 2.0) -> list[str]:
    """See ``Race.release_prepared``."""
    left = []
    for gid, name in list(race.prepared.items()):
        dialect = race.backend.dialect
        sql = dialect.rollback_prepared(gid)
        session = race.sessions.get(name)
        try:
            if dialect.xa_owner_finishes and session is not None and session.running is None \
                    and not session.conn.closed:
                res = await within(session.conn.execute(sql), timeout)
                if res.outcome == "connection_lost":
                    await within(race.backend.run_admin([sql]), timeout)
            else:
                await within(race.backend.run_admin([sql]), timeout)
        except (asyncio.TimeoutError, ConnectError, OSError):
            left.append(gid)  # the server did not answer: it is still there
            continue
        except Exception:
            pass  # the server answered (e.g. no such prepared transaction any more)
        race.prepared.pop(gid, None)
    return left


async def within(aw, timeout: float):
    """``aw``'s result within ``timeout`` s, or TimeoutError -- without waiting for
    it to react to being cancelled (a driver call in a worker thread on a server
    that does not answer would not), unlike asyncio.wait_for."""
    task = asyncio.ensure_future(aw)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
    except asyncio.CancelledError:
        task.cancel()
        task.add_done_callback(_consume)
        raise
    if not done:
        task.cancel()
        task.add_done_callback(_consume)
        raise asyncio.TimeoutError
    return task.result()


def _consume(task: asyncio.Future) -> None:
    if not task.cancelled():
        task.exception()


async def bounded(aw, timeout: float) -> None:
    """Await ``aw`` for at most ``timeout`` s, swallowing its errors (cleanup)."""
    with contextlib.suppress(asyncio.TimeoutError, Exception):
        await within(aw, timeout)
