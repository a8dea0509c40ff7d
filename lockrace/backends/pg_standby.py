"""The ``postgres-standby`` topology's hooks: a PostgreSQL primary and a hot standby.

Each node is an ordinary PostgresBackend (the standby's is read-only: it
creates nothing, the sandbox reaches it by replication).  What the topology
adds, all asked of the servers' own views (see pg_replication.py):

* after every statement on the primary, its WAL is flushed, so that the
  standby receives it now, as it would on a busy primary (an ACCESS EXCLUSIVE
  lock of a transaction that has not committed is otherwise sent only with
  the next commit), and if replaying it gets stuck on a standby session
  within a second, a note says so ("replay on the standby waits for C ...");
* before every statement on the standby, lockrace waits until the standby has
  replayed what the primary wrote -- unless replay is itself stuck on a
  recovery conflict, which is then shown as a note ("replay on the standby
  waits for B ...") and left to PostgreSQL (max_standby_streaming_delay);
* setup and teardown (on the primary) are waited for on the standby too;
* server-wide statements (ALTER SYSTEM, pg_reload_conf(), CREATE ROLE, ...:
  core/serverwide.py) are refused on a pair lockrace did not start.

A standby session blocked by a replayed lock is reported blocked by "the
startup process (replay)": the monitor names non-session blockers from
``pg_stat_activity.backend_type`` (backends/postgres.py).
"""

from __future__ import annotations


import psycopg

from ..core.events import StatementResult
from ..core.serverwide import server_wide
from .base import ConnectError
from .cluster import ClusterBackend, ClusterHooks
from .pg_replication import ReplayGate
from ..core.rows import one


class StandbyHooks(ClusterHooks):
    def __init__(self) -> None:
        self.gates: dict[int, ReplayGate] = {}  # per set of monitor connections (one per race)
        self.stuck = ""  # the last "replay waits for ..." said, not repeated while it still holds

    def gate(self, monitors) -> ReplayGate | None:
        primary, standby = monitors.get("primary"), monitors.get("standby")
        if primary is None or standby is None:
            return None
        key = id(primary.conn)
        gate = self.gates.get(key)
        if gate is None or gate.primary is not primary.conn or gate.standby is not standby.conn:
            if len(self.gates) > 16:
                self.gates.clear()
            gate = self.gates[key] = ReplayGate(primary.conn, standby.conn)
        return gate

    async def check(self, cluster) -> None:
        """Given by DSNs: the primary first, then a hot standby -- checked on
        both before the sandbox is created anywhere."""
        if cluster.origin == "DSN":
            for node, target in cluster.nodes.items():
                await _check_role(node, target)

    async def after_admin(self, cluster: ClusterBackend) -> None:
        nodes = cluster.cluster.nodes
        gate = await ReplayGate.connect(nodes["primary"].conninfo, nodes["standby"].conninfo)
        try:
            state = await gate.sync(timeout=10.0)
        finally:
            await gate.close()
        if not state.replayed and not state.waiting_for:
            raise RuntimeError(state.describe())

    async def before_statement(self, cluster: ClusterBackend, node: str, monitors, sql: str,
                               name_of=None) -> str | StatementResult | None:
        wide = None if cluster.cluster.owned else server_wide(sql, "postgres")
        if wide:
            return StatementResult(
                "error", message=f"lockrace does not change the settings of a server it did not start ({wide}"
                                 " changes the whole server); this needs lockrace's own primary + standby")
        if node != "standby":
            return None
        gate = self.gate(monitors)
        if gate is None:
            return None
        state = await gate.sync()
        return self._say(state, name_of)

    async def after_statement(self, cluster: ClusterBackend, node: str, monitors, result: StatementResult,
                              name_of=None) -> str | None:
        if node != "primary" or result.outcome == "connection_lost":
            return None
        gate = self.gate(monitors)
        if gate is None:
            return None
        # send the statement's WAL now, and say so if replaying it gets stuck on a standby session
        state = await gate.sync(timeout=1.0)
        return self._say(state, name_of) if state.waiting_for else None

    def _say(self, state, name_of) -> str | None:
        if state.replayed:
            self.stuck = ""
            return None
        text = state.describe(lambda pid: name_of(pid, "standby") if name_of else f"pid {pid}")
        if state.waiting_for and text == self.stuck:
            return None
        self.stuck = text if state.waiting_for else ""
        return text


async def _check_role(node: str, target) -> None:
    """One clear sentence when a DSN given for the primary is a standby or the
    other way round (before the sandbox would be created on the wrong server)."""
    try:
        conn = await psycopg.AsyncConnection.connect(target.conninfo, autocommit=True, connect_timeout=5)
    except (psycopg.Error, OSError):
        return  # the ordinary open reports it, with its own words
    try:
        cur = await conn.execute("SELECT pg_is_in_recovery()")
        in_recovery = bool(one(await cur.fetchone())[0])
    finally:
        await conn.close()
    where = target.describe()
    if node == "primary" and in_recovery:
        raise ConnectError(f"--standby: the first DSN must be the primary, but {where} is a standby"
                           " (pg_is_in_recovery() is true)")
    if node == "standby" and not in_recovery:
        raise ConnectError(f"--standby: the second DSN must be a hot standby, but {where} is not in recovery"
                           " (pg_is_in_recovery() is false)")


def hooks() -> StandbyHooks:
    return StandbyHooks()
