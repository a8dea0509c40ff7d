"""A cluster as one Backend: an ordinary backend per node, plus topology hooks.

The Race (engine/race.py) sees ``ClusterBackend.nodes`` and opens each
session on its own node's backend and one monitor per node; blocked
detection, cancels, budgets and session idents are all per node.  Setup,
teardown and the sandbox live on the first node (Galera replicates them; a
standby is read-only), and ``ClusterHooks.after_admin`` then waits until
every other node has caught up.  Node-specific outcomes (a Galera
certification conflict, a standby's recovery conflict) are decided by
``ClusterHooks.refine`` from what that node's own monitor connection reports.
"""

from __future__ import annotations

import dataclasses

from ..core.events import StatementResult
from ..registry import cluster_engine
from ..servers.cluster import Cluster
from .base import Backend, MonitorConnection, SessionConnection
from .single import open_single


class ClusterHooks:
    """What a topology adds to its nodes' ordinary backends.  Every method has
    a do-nothing default; a topology overrides what it needs."""

    async def check(self, cluster: Cluster) -> None:
        """Before any node is opened (nothing created anywhere yet): raise
        ConnectError if the nodes are not what the topology needs."""

    async def open_node(self, node: str, target, first: bool) -> Backend:
        """Open the ordinary backend of one node (the first node first: it creates the sandbox)."""
        return await open_single(target)

    async def node_opened(self, cluster: "ClusterBackend", node: str, monitor: MonitorConnection) -> None:
        """A race opened its monitor connection on ``node`` (e.g. read counters to compare with later)."""

    async def refine(self, cluster: "ClusterBackend", node: str, monitor: MonitorConnection,
                     result: StatementResult, sql: str) -> None:
        """A statement on ``node`` failed: change ``result.outcome`` (and ``result.conflict``)
        when the node says the failure is a cluster one.  Runs before listeners hear of it."""

    async def waits(self, cluster: "ClusterBackend", node: str, monitor: MonitorConnection, idents: list[int],
                    reports: dict) -> dict:
        """Add waits the node's lock views do not list (e.g. a Galera read waiting for its node to
        catch up, a standby query waiting for replay); ``reports`` maps ident -> WaitReport."""
        return reports

    async def after_admin(self, cluster: "ClusterBackend") -> None:
        """Setup/teardown ran on the first node: wait until every node has it."""

    async def before_statement(self, cluster: "ClusterBackend", node: str, monitors: dict[str, MonitorConnection],
                               sql: str, name_of=None) -> "str | StatementResult | None":
        """A session on ``node`` is about to run ``sql`` (e.g. wait until that node
        has replayed what other nodes did).  A str is a note to show; a
        StatementResult refuses the statement (it is not run).  ``name_of(ident,
        node)`` names a backend as the race does."""
        return None

    async def after_statement(self, cluster: "ClusterBackend", node: str, monitors: dict[str, MonitorConnection],
                              result: StatementResult, name_of=None) -> str | None:
        """A statement on ``node`` finished (e.g. send its WAL to the other nodes now);
        a str returned is a note to show."""
        return None

    def blocker_name(self, node: str, ident: int) -> str | None:
        """A name for a blocker that is none of the race's sessions (e.g. a replication applier)."""
        return None


class ClusterBackend(Backend):
    def __init__(self, cluster: Cluster, nodes: dict[str, Backend], hooks: ClusterHooks):
        self.cluster = cluster
        self.topology = cluster.topology
        self.nodes = nodes
        self.hooks = hooks
        first = self.first_backend
        self.family = first.family
        self.flavor = first.flavor
        self.version = first.version
        self.sandbox = first.sandbox

    @property
    def first_node(self) -> str:
        return next(iter(self.nodes))

    @property
    def first_backend(self) -> Backend:
        return self.nodes[self.first_node]

    @property
    def server_name(self) -> str:
        label = cluster_engine(self.topology).label
        return f"{label} {self.version} ({', '.join(self.nodes)})"

    async def connect_session(self, name: str) -> SessionConnection:
        return await self.first_backend.connect_session(name)

    async def connect_monitor(self) -> MonitorConnection:
        return await self.first_backend.connect_monitor()

    async def run_admin(self, sqls: list[str]) -> None:
        await self.first_backend.run_admin(sqls)
        await self.hooks.after_admin(self)

    async def reset_sandbox(self) -> None:
        await self.first_backend.reset_sandbox()
        await self.hooks.after_admin(self)

    async def drop_sandbox(self) -> None:
        await self.first_backend.drop_sandbox()


async def open_cluster(cluster: Cluster, hooks: ClusterHooks | None = None) -> ClusterBackend:
    """Open an ordinary backend on every node (first node first: it creates the sandbox);
    ``hooks``: what the topology adds (none: the do-nothing defaults)."""
    hooks = hooks or ClusterHooks()
    await hooks.check(cluster)
    nodes: dict[str, Backend] = {}
    for index, (name, target) in enumerate(cluster.nodes.items()):
        if index and not target.owned:  # the first node's sandbox, replicated: use it, do not claim it again
            target = dataclasses.replace(target, sandbox=nodes[next(iter(nodes))].sandbox, joins=True)
        nodes[name] = await hooks.open_node(name, target, index == 0)
    backend = ClusterBackend(cluster, nodes, hooks)
    await hooks.after_admin(backend)
    return backend
