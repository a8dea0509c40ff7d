"""What MariaDB Galera adds to its nodes' ordinary MariaDB backends.

* ``refine``: Galera answers 1213 ("Deadlock found when trying to get lock")
  both for an InnoDB deadlock and for a transaction that lost replication
  certification or was brute-force aborted by a replicated write.  The node's
  own counters tell them apart: each node's monitor remembers
  ``wsrep_local_cert_failures`` and ``wsrep_local_bf_aborts`` and a 1213 on
  that node compares them afresh (outcome.galera_conflict).
* ``after_admin``: setup ran on node1; wait until every node has applied as
  much as node1 committed (``wsrep_last_committed``).
"""

from __future__ import annotations

import asyncio

import re
from typing import TYPE_CHECKING, cast

from ..core.events import Budget, LockInfo, StatementResult
from ..core.outcome import GALERA_COUNTERS, galera_conflict
from .base import MonitorConnection, WaitReport
from .cluster import ClusterBackend, ClusterHooks

if TYPE_CHECKING:
    from .mysql import MySQLBackend, MySQLMonitor

_COUNTERS_SQL = ("SHOW GLOBAL STATUS WHERE Variable_name IN ("
                 + ", ".join(f"'{c}'" for c in GALERA_COUNTERS) + ")")
CATCH_UP_S = 10.0


async def read_counters(monitor) -> dict[str, int]:
    rows = await monitor.run_query(_COUNTERS_SQL)
    return {str(k).lower(): int(v) for k, v in rows}


async def status(backend, names: tuple[str, ...]) -> dict[str, str]:
    """A few wsrep status values of one node, on a short-lived connection."""
    conn = await backend.connect(None)

    def work():
        cur = conn.cursor()
        cur.execute("SHOW GLOBAL STATUS WHERE Variable_name IN (" + ", ".join(["%s"] * len(names)) + ")", names)
        return {str(k).lower(): str(v) for k, v in cur.fetchall()}

    try:
        return await asyncio.to_thread(work)
    finally:
        await asyncio.to_thread(conn.close)


def _on_galera(monitor: MonitorConnection) -> MySQLMonitor:
    """A Galera node's monitor: a MariaDB one (backends/mysql.py)."""
    return cast("MySQLMonitor", monitor)


class GaleraHooks(ClusterHooks):
    async def open_node(self, node: str, target, first: bool):
        await self._check_galera(node, target)  # before anything is created there
        backend = await super().open_node(node, target, first)
        # lockrace reads a session's budgets back after each SET: under the session's own
        # wsrep_sync_wait that read would wait for the node to catch up, like the user's reads
        cast("MySQLBackend", backend).budget_prefix = "SET STATEMENT wsrep_sync_wait = 0 FOR "
        return backend

    async def _check_galera(self, node: str, target) -> None:
        """A DSN given for a Galera node must be one: wsrep on, and the node ready for queries."""
        from .base import ConnectError
        from .mysql import MySQLBackend

        probe = MySQLBackend(target)
        conn = await asyncio.to_thread(probe.connect_blocking, None)

        def work():
            cur = conn.cursor()
            try:
                cur.execute("SELECT @@wsrep_on")
                on = str(cur.fetchone()[0])
            except Exception:  # MySQL 8 has no wsrep variables at all
                return "OFF", ""
            cur.execute("SHOW GLOBAL STATUS WHERE Variable_name = 'wsrep_ready'")
            row = cur.fetchone()
            return on, str(row[1]) if row else ""

        try:
            on, ready = await asyncio.to_thread(work)
        finally:
            await asyncio.to_thread(conn.close)
        if on not in ("1", "ON"):
            raise ConnectError(f"{node} at {target.describe()} is not a Galera node (wsrep_on is OFF)")
        if ready != "ON":
            raise ConnectError(f"{node} at {target.describe()} is not ready for queries (wsrep_ready is {ready or 'unknown'})")

    async def node_opened(self, cluster: ClusterBackend, node: str, node_monitor: MonitorConnection) -> None:
        monitor = _on_galera(node_monitor)
        try:
            monitor.galera_seen = await read_counters(monitor)
        except Exception:  # without a baseline, a 1213 stays what the message says
            monitor.galera_seen = None

    async def refine(self, cluster: ClusterBackend, node: str, node_monitor: MonitorConnection,
                     result: StatementResult, sql: str) -> None:
        if result.code != "1213":
            return
        monitor = _on_galera(node_monitor)
        before = monitor.galera_seen
        now = await read_counters(monitor)
        monitor.galera_seen = now  # each cluster failure is counted for one 1213 only
        if before is None:
            return
        why = galera_conflict(1213, before, now)
        if why:
            result.outcome = "certification_conflict"
            result.conflict = why

    async def waits(self, cluster: ClusterBackend, node: str, node_monitor: MonitorConnection, idents: list[int],
                    reports: dict) -> dict:
        """A read under wsrep_sync_wait waits, before it starts executing, until its node has
        applied every write the cluster committed before it.  InnoDB's lock views do not show
        that wait; the node does: the statement sits in state 'starting' while the node is not
        Synced (e.g. paused by FLUSH TABLES WITH READ LOCK), and whoever holds that node's
        backup lock (FTWRL) is what holds it up."""
        missing = [int(i) for i in idents if i not in reports]
        if not missing:
            return reports
        monitor = _on_galera(node_monitor)
        ids = ",".join(str(i) for i in missing)
        rows = await monitor.run_query(f"SELECT ID FROM information_schema.PROCESSLIST WHERE ID IN ({ids})"
                                    " AND COMMAND = 'Query' AND STATE = 'starting'")
        if not rows:
            return reports
        state = dict(await monitor.run_query("SHOW GLOBAL STATUS WHERE Variable_name = 'wsrep_local_state_comment'"))
        comment = next(iter(state.values()), "")
        if comment == "Synced":
            return reports
        holders: tuple[int, ...] = ()
        if getattr(monitor, "has_mdl_info", False):
            found = await monitor.run_query("SELECT DISTINCT THREAD_ID FROM information_schema.METADATA_LOCK_INFO"
                                         " WHERE LOCK_MODE LIKE 'MDL_BACKUP_FTWRL%'")
            holders = tuple(sorted(int(r[0]) for r in found))
        lock = LockInfo("replication", "", "", f"{node} to catch up with the cluster (wsrep_sync_wait; {node} is {comment})")
        budget = await self._causal_budget(monitor)
        out = dict(reports)
        for (ident,) in rows:
            out[int(ident)] = WaitReport(int(ident), holders, lock, budget=budget)
        return out

    async def _causal_budget(self, monitor) -> Budget | None:
        """repl.causal_read_timeout from the node's provider options (PT30S by default)."""
        rows = await monitor.run_query("SELECT @@wsrep_provider_options")
        m = re.search(r"repl\.causal_read_timeout\s*=\s*PT(?:(\d+)M)?(\d+(?:\.\d+)?)S", str(rows[0][0]) if rows else "")
        if not m:
            return None
        return Budget("repl.causal_read_timeout", (int(m.group(1) or 0) * 60 + float(m.group(2))) * 1000)

    async def after_admin(self, cluster: ClusterBackend) -> None:
        first = cluster.first_backend
        target = int((await status(first, ("wsrep_last_committed",))).get("wsrep_last_committed", "0"))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CATCH_UP_S
        for node, backend in cluster.nodes.items():
            if backend is first:
                continue
            while True:
                got = await status(backend, ("wsrep_last_committed", "wsrep_ready"))
                if int(got.get("wsrep_last_committed", "0")) >= target:
                    break
                if loop.time() > deadline:
                    raise RuntimeError(f"{node} did not apply node1's setup within {CATCH_UP_S:g} s"
                                       f" (wsrep_last_committed {got.get('wsrep_last_committed')} of {target},"
                                       f" wsrep_ready {got.get('wsrep_ready')})")
                await asyncio.sleep(0.01)


def hooks() -> GaleraHooks:
    return GaleraHooks()
