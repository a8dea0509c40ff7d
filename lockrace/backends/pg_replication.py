"""Keeping a race on a PostgreSQL primary + hot standby in step with replication.

A step on the standby should see what the primary did in the steps before it,
as a reader would a moment later.  Before a standby step the engine asks this
gate to *sync*: the primary flushes its WAL (see ``flush_wal``: WAL of a
transaction that has not committed, such as the record of an ACCESS EXCLUSIVE
lock, is otherwise sent only when some commit flushes it) and the gate waits
until the standby has replayed up to that point -- or until replay itself is
stuck, waiting for a standby query (a recovery conflict), which is then
reported instead of waited out: PostgreSQL resolves it after
max_standby_streaming_delay.

Everything here is asked of the servers' own views: ``pg_current_wal_insert_lsn()``
on the primary, ``pg_last_wal_replay_lsn()``, ``pg_stat_activity`` (the
``startup`` process and its wait event) and ``pg_locks`` on the standby.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from time import perf_counter_ns

import psycopg

from ..servers.pg_standby import lsn_int, lsn_text
from ..core.rows import one

_FLUSH_17 = "SELECT pg_logical_emit_message(false, 'lockrace', '', true)"

# What replay (the standby's startup process) is doing, and who holds it up:
# for a lock, the sessions holding a granted lock on the relation it waits for.
_REPLAY_SQL = """
SELECT pg_last_wal_replay_lsn()::text, a.pid, a.wait_event_type, a.wait_event,
       current_setting('max_standby_streaming_delay'),
       w.relation::regclass::text, w.mode,
       ARRAY(SELECT DISTINCT h.pid FROM pg_locks h
             WHERE w.relation IS NOT NULL AND h.relation = w.relation AND h.database = w.database
               AND h.granted AND h.pid <> a.pid),
       ARRAY(SELECT s.pid FROM pg_stat_activity s
             WHERE s.backend_type = 'client backend' AND s.backend_xmin IS NOT NULL AND s.pid <> pg_backend_pid()
             ORDER BY s.pid)
FROM pg_stat_activity a
LEFT JOIN LATERAL (SELECT * FROM pg_locks l WHERE l.pid = a.pid AND NOT l.granted LIMIT 1) w ON true
WHERE a.backend_type = 'startup'
"""

STUCK_EVENTS = ("RecoveryConflictSnapshot", "RecoveryConflictTablespace", "RecoveryConflictLock")


@dataclass
class ReplayState:
    """Where replay stands after a sync."""

    replayed: bool  # the standby replayed everything the primary had written
    target: str = ""  # the primary's WAL position asked for
    replay_lsn: str = ""
    seconds: float = 0.0
    waiting_for: str = ""  # what replay waits for: "lock", "snapshot", ... ("" = not stuck)
    relation: str = ""
    holders: tuple[int, ...] = field(default_factory=tuple)  # standby backends holding it up
    delay: str = ""  # the standby's max_standby_streaming_delay, as it shows it

    def describe(self, name_of=lambda pid: f"pid {pid}") -> str:
        if self.replayed:
            return f"standby replayed the primary's WAL up to {self.target} in {self.seconds * 1000:.1f} ms"
        budget = f"max_standby_streaming_delay ({self.delay})" if self.delay else "max_standby_streaming_delay"
        if self.delay == "-1":
            budget = "never (max_standby_streaming_delay = -1: replay waits as long as it takes)"
        if self.waiting_for == "lock":
            who = ", ".join(name_of(p) for p in self.holders) or "a standby session"
            return (f"replay on the standby waits for {who} (a lock on {self.relation or 'a table'}):"
                    f" PostgreSQL cancels that after {budget}")
        if self.waiting_for == "snapshot":
            open_now = f" (open now: {', '.join(name_of(p) for p in self.holders)})" if self.holders else ""
            return (f"replay on the standby waits for standby snapshots that may still need rows the primary"
                    f" cleaned up (VACUUM, pruning){open_now}: PostgreSQL cancels those after {budget}")
        if self.waiting_for:
            return (f"replay on the standby waits for standby queries ({self.waiting_for} conflict):"
                    f" PostgreSQL cancels them after {budget}")
        return f"standby has not replayed up to {self.target} yet (at {self.replay_lsn})"


class ReplayGate:
    """Syncs over one connection to the primary and one to the standby
    (autocommit AsyncConnections: a race's own monitor connections, or its own
    from ``connect``)."""

    def __init__(self, primary: psycopg.AsyncConnection, standby: psycopg.AsyncConnection, owned: bool = False):
        self.primary = primary
        self.standby = standby
        self.owned = owned
        self.can_emit: bool | None = None

    @classmethod
    async def connect(cls, primary_conninfo: str, standby_conninfo: str) -> "ReplayGate":
        app = "lockrace replication"
        primary = await psycopg.AsyncConnection.connect(primary_conninfo, autocommit=True, connect_timeout=5,
                                                        application_name=app)
        try:
            standby = await psycopg.AsyncConnection.connect(standby_conninfo, autocommit=True, connect_timeout=5,
                                                            application_name=app)
        except BaseException:
            await primary.close()
            raise
        return cls(primary, standby, owned=True)

    async def flush(self) -> int:
        """Flush the primary's WAL; returns the position a standby must replay to."""
        if self.primary.info.server_version >= 170000 and self.can_emit is not False:
            try:
                await self.primary.execute(_FLUSH_17)
                self.can_emit = True
            except psycopg.errors.InsufficientPrivilege:
                self.can_emit = False  # a user without the right to it: an empty synchronous commit does the same
        if self.primary.info.server_version < 170000 or self.can_emit is False:
            async with self.primary.transaction():
                await self.primary.execute("SET LOCAL synchronous_commit = on")
                await self.primary.execute("SELECT pg_current_xact_id()")
        cur = await self.primary.execute("SELECT pg_current_wal_insert_lsn()::text")
        insert = lsn_int(one(await cur.fetchone())[0])
        if insert % 8192 in (24, 40):  # just past a page header: replay stops at the page start
            insert -= insert % 8192
        return insert

    async def state(self, target: int) -> ReplayState:
        cur = await self.standby.execute(_REPLAY_SQL)
        row = await cur.fetchone()
        if row is None:  # no startup process: not (or no longer) a standby
            return ReplayState(True, lsn_text(target))
        lsn, _pid, wtype, wevent, delay, rel, _mode, holders, snapshots = row
        state = ReplayState(lsn is not None and lsn_int(lsn) >= target, lsn_text(target), lsn or "", delay=delay or "")
        if not state.replayed:
            if wtype == "Lock":
                state.waiting_for, state.relation, state.holders = "lock", rel or "", tuple(holders or ())
            elif wevent in STUCK_EVENTS:
                state.waiting_for = wevent.removeprefix("RecoveryConflict").lower()
                if state.waiting_for == "snapshot":  # which of them PostgreSQL will cancel, it does not say
                    state.holders = tuple(snapshots or ())
        return state

    async def sync(self, timeout: float = 3.0, settle: float = 0.05) -> ReplayState:
        """Flush the primary's WAL and wait until the standby replayed it, or
        until replay has been waiting on a conflict for ``settle`` seconds, or
        ``timeout``: whichever comes first."""
        t0 = perf_counter_ns()
        target = await self.flush()
        deadline = asyncio.get_running_loop().time() + timeout
        stuck_since = None
        while True:
            state = await self.state(target)
            now = asyncio.get_running_loop().time()
            state.seconds = (perf_counter_ns() - t0) / 1e9
            if state.replayed or now > deadline:
                return state
            if state.waiting_for:
                stuck_since = stuck_since or now
                if now - stuck_since >= settle:
                    return state
            else:
                stuck_since = None
            await asyncio.sleep(0.003)

    async def close(self) -> None:
        """Close the connections if this gate opened them."""
        if not self.owned:
            return
        for conn in (self.primary, self.standby):
            try:
                await conn.close()
            except psycopg.Error:
                pass
