"""Clusters: several servers (nodes) that a race spreads its sessions over.

A cluster engine (``galera``, ``postgres-standby``) is a named topology with
an ordered list of nodes; each node is an ordinary ``Target`` (so every
backend works on a node unchanged).  Like the single servers, a cluster is
either started privately by lockrace (no setup; stopped and removed on exit,
on signals too) or given as DSNs of an existing cluster, one per node in node
order: ``--galera DSN1,DSN2`` / ``LOCKRACE_GALERA_DSNS``.

Adding a topology: one ``Topology`` entry in ``TOPOLOGIES`` naming its nodes
(they must match ``scenario.model.TOPOLOGIES``), the single-server engine its
nodes speak, and ``starter``: "module:function", a blocking function
returning a started ``Cluster`` (it must stop whatever it started if it
fails).  Optional ``hooks`` ("module:function") returns a ``ClusterHooks``
that the cluster backend calls (see backends/cluster.py).
"""

from __future__ import annotations

import importlib
import os
import re
from dataclasses import dataclass, field
from typing import Callable

from .target import DsnError, Target, parse_mysql_dsn, redact, sandbox_name


@dataclass(frozen=True)
class Topology:
    name: str  # galera | postgres-standby
    label: str  # "MariaDB Galera", "PostgreSQL primary + hot standby"
    engine: str  # the single-server engine every node speaks: mysql | postgres
    nodes: tuple[str, ...]
    env: str  # environment variable with the DSNs of an existing cluster
    flag: str  # command-line flag with the same
    starter: str  # "module:function" -> Cluster (blocking)
    hooks: str = ""  # "module:function" -> ClusterHooks (see backends/cluster.py)
    needs: str = ""  # what a private cluster needs on the machine, for error messages


TOPOLOGIES: dict[str, Topology] = {
    "galera": Topology(
        "galera", "MariaDB Galera", "mysql", ("node1", "node2"), "LOCKRACE_GALERA_DSNS", "--galera",
        "lockrace.servers.galera:start_galera", "lockrace.backends.galera:hooks",
        needs="mariadbd and the galera-4 provider (apt-get install mariadb-server galera-4 rsync)",
    ),
    "postgres-standby": Topology(
        "postgres-standby", "PostgreSQL primary + hot standby", "postgres", ("primary", "standby"),
        "LOCKRACE_STANDBY_DSNS", "--standby", "lockrace.servers.pg_standby:start_standby", "lockrace.backends.pg_standby:hooks",
    ),
}


def load(ref: str) -> Callable:
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclass
class Cluster:
    """A cluster's nodes, in order (the first one takes setup and teardown).

    Quacks like a ``Target`` where the app and the CLI keep one: ``origin``,
    ``owned``, ``server`` (None: a dead node is not restarted in place),
    ``describe()``, ``stop()``.
    """

    topology: str
    origin: str  # "private" or "DSN"
    nodes: dict[str, Target]
    stoppers: list[Callable[[], None]] = field(default_factory=list)
    """What stops the processes lockrace started (in order); empty for DSNs."""
    startup_s: float = 0.0
    """Private clusters: seconds from the first process start until every node was ready."""
    details: dict[str, str] = field(default_factory=dict)
    """Private clusters: what was started, for benchmarks and the README (ports, SST method, ...)."""
    server = None

    @property
    def engine(self) -> str:
        return self.topology

    @property
    def owned(self) -> bool:
        return bool(self.stoppers)

    @property
    def first(self) -> str:
        return next(iter(self.nodes))

    @property
    def sandbox(self) -> str:
        """The sandbox database (schema) every node uses."""
        return self.nodes[self.first].sandbox

    def describe(self) -> str:
        return ", ".join(f"{name}={t.describe()}" for name, t in self.nodes.items())

    def stop(self, timeout: float = 10.0) -> None:
        """Stop what lockrace started (``timeout`` is a Target's: the stoppers keep their own bounds)."""
        stoppers, self.stoppers = self.stoppers, []
        errors = []
        for stop in stoppers:
            try:
                stop()
            except Exception as exc:  # stop the rest anyway
                errors.append(exc)
        if errors:
            raise errors[0]


_DSN_SPLIT = re.compile(r",\s*(?=(?:mysql|mariadb|postgres|postgresql)://)")


def cluster_target(topology: str, dsns: str | None) -> Cluster:
    """The cluster for ``topology``: from DSNs (flag, then env var) or started privately."""
    topo = TOPOLOGIES[topology]
    dsns = dsns or os.environ.get(topo.env) or None
    if dsns is None:
        try:
            starter = load(topo.starter)
        except (ImportError, AttributeError):
            from .process import ServerStartError

            raise ServerStartError(f"lockrace cannot start a private {topo.label} cluster;"
                                   f" give the nodes' DSNs with {topo.flag} or {topo.env}") from None
        return starter()
    parts = [p.strip() for p in _DSN_SPLIT.split(dsns.strip()) if p.strip()]
    if len(parts) != len(topo.nodes):
        raise DsnError(
            f"{topo.flag} needs {len(topo.nodes)} DSNs, one per node ({', '.join(topo.nodes)}), comma-separated;"
            f" got {len(parts)}: {redact(dsns)}"
        )
    sandbox = sandbox_name()
    nodes: dict[str, Target] = {}
    for node, dsn in zip(topo.nodes, parts):
        if topo.engine == "mysql":
            if not dsn.startswith(("mysql://", "mariadb://")):
                raise DsnError(f"{topo.flag}: {node} needs a mysql:// DSN, got {redact(dsn)}")
            nodes[node] = Target("mysql", "DSN", mysql_kwargs=parse_mysql_dsn(dsn), sandbox=sandbox)
        else:
            if not dsn.startswith(("postgres://", "postgresql://")):
                raise DsnError(f"{topo.flag}: {node} needs a postgresql:// DSN, got {redact(dsn)}")
            nodes[node] = Target("postgres", "DSN", conninfo=dsn, sandbox=sandbox,
                                 hot_standby=(topology == "postgres-standby" and node == "standby"))
    return Cluster(topology, "DSN", nodes)
