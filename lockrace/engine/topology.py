"""Where a race's sessions sit: one server, or a cluster's nodes.

``topology_for`` gives the race a ``SingleServer`` or a ``Cluster``; both answer
the same questions (which node a session is on, which backend serves it, what a
node must do before and after a statement), so the rest of the engine never asks
which of the two it has.  On a single server every session is on the node "".

A backend is a cluster when it has nodes (``backend.nodes``: name -> backend);
``nodes_of`` is the one place that reads it.
"""

from __future__ import annotations

import asyncio
from time import perf_counter_ns
from typing import TYPE_CHECKING, cast

from ..backends.base import Backend
from ..core.events import ServerNote, StatementResult

if TYPE_CHECKING:
    from ..backends.base import MonitorConnection
    from ..backends.cluster import ClusterBackend
    from .race import Race
    from .session import Session


def nodes_of(backend: Backend) -> dict[str, Backend] | None:
    """A cluster's nodes by name; None on a single server (no nodes, or only the node "")."""
    nodes = getattr(backend, "nodes", None)
    if not nodes or list(nodes) == [""]:
        return None
    return nodes


class SingleServer:
    """Every session on the one server (node ""), one monitor."""

    announces = True  # StatementStarted goes out before the send (see Statements.submit)
    answers_early = True  # an answer that needs nothing more reaches the caller from the driver's look
    names_processes = False

    def __init__(self, race: Race):
        self.race = race

    def node_for(self, name: str) -> str:
        return ""

    def backend_for(self, node: str) -> Backend:
        return self.race.backend

    async def open_monitors(self) -> dict[str, MonitorConnection]:
        return {"": await self.race.backend.connect_monitor()}

    async def node_opened(self, node: str, monitor: MonitorConnection) -> None:
        pass

    async def waits(self, node: str, monitor: MonitorConnection, idents: list[int], reports):
        return reports

    def blocker_name(self, node: str, ident: int) -> str | None:
        return None

    def blocked_poll_s(self, default: float) -> float | None:
        monitor = self.race.monitor
        return monitor.blocked_poll_s(default) if monitor is not None else default  # MariaDB: backends/mysql.py

    async def before(self, session: Session, sql: str) -> StatementResult | None:
        return None

    async def after_answer(self, session: Session, sql: str, result: StatementResult) -> None:
        pass

    async def after(self, session: Session, result: StatementResult) -> None:
        pass


class Cluster(SingleServer):
    """Each session on a node (``race.placement``), one monitor per node; the
    backend's topology hooks prepare, explain and name on the session's own node."""

    announces = False
    answers_early = False
    names_processes = True  # a blocker may be a cluster's own process (replay, a node's applier)

    def __init__(self, race: Race, nodes: dict[str, Backend]):
        super().__init__(race)
        self.nodes = nodes
        self.cluster = cast("ClusterBackend", race.backend)  # its nodes, topology and hooks

    def node_for(self, name: str) -> str:
        """The node session ``name`` sits on: as placed, else the topology's default."""
        race = self.race
        node = race.placement.get(name)
        if node not in self.nodes:
            from ..registry import CLUSTER_NODES as TOPOLOGIES, default_node

            known = list(self.nodes)
            topology = self.cluster.topology
            if topology in TOPOLOGIES and len(known) == len(TOPOLOGIES[topology]):
                node = default_node(topology, name, race.names.index(name) if name in race.names else 0)
            else:
                node = known[0]
            race.placement[name] = node
        return node

    def backend_for(self, node: str) -> Backend:
        return self.nodes[node]

    async def open_monitors(self) -> dict[str, MonitorConnection]:
        names = list(self.nodes)
        got = await asyncio.gather(*(self.nodes[n].connect_monitor() for n in names), return_exceptions=True)
        failure = next((m for m in got if isinstance(m, BaseException)), None)
        if failure is not None:
            for m in got:
                if not isinstance(m, BaseException):
                    await m.close()
            raise failure
        monitors = dict(zip(names, [m for m in got if not isinstance(m, BaseException)]))
        for node, monitor in monitors.items():
            await self.node_opened(node, monitor)
        return monitors

    async def node_opened(self, node: str, monitor: MonitorConnection) -> None:
        await self.cluster.hooks.node_opened(self.cluster, node, monitor)

    async def waits(self, node: str, monitor: MonitorConnection, idents: list[int], reports):
        return await self.cluster.hooks.waits(self.cluster, node, monitor, idents, reports)

    def blocker_name(self, node: str, ident: int) -> str | None:
        return self.cluster.hooks.blocker_name(node, ident)

    def blocked_poll_s(self, default: float) -> float | None:
        return default

    async def before(self, session: Session, sql: str) -> StatementResult | None:
        """The topology's preparation for a statement on this node (a hot standby
        first replays what the primary did); a note it returns is shown, a result
        it returns refuses the statement."""
        race = self.race
        try:
            said = await asyncio.wait_for(
                self.cluster.hooks.before_statement(self.cluster, session.node, race.monitors, sql, race.name_of), 10)
        except (asyncio.TimeoutError, Exception) as exc:
            said = f"could not prepare {session.node}: {exc or type(exc).__name__}"
        if isinstance(said, StatementResult):
            return said
        if said:
            race.emit(ServerNote(session.name, perf_counter_ns(), said, node=session.node))
        return None

    async def after_answer(self, session: Session, sql: str, result: StatementResult) -> None:
        """The answer says on which node; a cluster failure is told from an ordinary one."""
        result.node = session.node
        if result.code and result.outcome != "connection_lost":
            await self._refine(session, sql, result)

    async def after(self, session: Session, result: StatementResult) -> None:
        race = self.race
        try:
            said = await asyncio.wait_for(
                self.cluster.hooks.after_statement(self.cluster, session.node, race.monitors, result, race.name_of), 5)
        except (asyncio.TimeoutError, Exception) as exc:
            said = None
            race.emit(ServerNote(session.name, perf_counter_ns(), f"after the statement on {session.node}: {exc}",
                                 "warning", node=session.node))
        if said:
            race.emit(ServerNote(session.name, perf_counter_ns(), said, node=session.node))

    async def _refine(self, session: Session, sql: str, result: StatementResult) -> None:
        """Let the topology tell a cluster failure from an ordinary one, from what the
        session's own node reports (e.g. Galera's wsrep counters)."""
        race = self.race
        monitor = race.monitor_for(session)
        if monitor is None:
            return
        try:
            await asyncio.wait_for(self.cluster.hooks.refine(self.cluster, session.node, monitor, result, sql), 5)
        except (asyncio.TimeoutError, Exception) as exc:
            race.emit(ServerNote(session.name, perf_counter_ns(), f"could not ask {session.node} why: {exc}", "warning",
                                 node=session.node))


def topology_for(race: Race) -> SingleServer:
    nodes = nodes_of(race.backend)
    return SingleServer(race) if nodes is None else Cluster(race, nodes)
