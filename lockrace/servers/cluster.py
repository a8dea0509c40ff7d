"""Clusters: several servers (nodes) that a race spreads its sessions over.

A cluster engine (``galera``, ``postgres-standby``) is a named topology with
an ordered list of nodes; each node is an ordinary ``Target`` (so every
backend works on a node unchanged).  Like the single servers, a cluster is
either started privately by lockrace (no setup; stopped and removed on exit,
on signals too) or given as DSNs of an existing cluster, one per node in node
order: ``--galera DSN1,DSN2`` / ``LOCKRACE_GALERA_DSNS``.

What a topology is (its nodes, label, flag, environment variable, family)
is the registry's (lockrace/registry.py); how a private cluster is started
is servers/choose.py's ``STARTERS``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Callable

from ..registry import Family, TopologyName, cluster_engine
from .target import DsnError, Target, parse_mysql_dsn, redact, sandbox_name


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


def cluster_target(topology: str, dsns: str | None, start: Callable[[], Cluster] | None = None) -> Cluster:
    """The cluster for ``topology``: from DSNs (flag, then env var), else ``start()`` (blocking:
    it starts a private cluster and stops whatever it started if it fails)."""
    spec = cluster_engine(topology)
    dsns = dsns or os.environ.get(spec.env) or None
    if dsns is None:
        if start is None:
            from .process import ServerStartError

            raise ServerStartError(f"lockrace cannot start a private {spec.label} cluster;"
                                   f" give the nodes' DSNs with {spec.flag} or {spec.env}")
        return start()
    parts = [p.strip() for p in _DSN_SPLIT.split(dsns.strip()) if p.strip()]
    if len(parts) != len(spec.nodes):
        raise DsnError(
            f"{spec.flag} needs {len(spec.nodes)} DSNs, one per node ({', '.join(spec.nodes)}), comma-separated;"
            f" got {len(parts)}: {redact(dsns)}"
        )
    sandbox = sandbox_name()
    nodes: dict[str, Target] = {}
    for node, dsn in zip(spec.nodes, parts):
        if spec.family == Family.MYSQL:
            if not dsn.startswith(("mysql://", "mariadb://")):
                raise DsnError(f"{spec.flag}: {node} needs a mysql:// DSN, got {redact(dsn)}")
            nodes[node] = Target("mysql", "DSN", mysql_kwargs=parse_mysql_dsn(dsn), sandbox=sandbox)
        else:
            if not dsn.startswith(("postgres://", "postgresql://")):
                raise DsnError(f"{spec.flag}: {node} needs a postgresql:// DSN, got {redact(dsn)}")
            nodes[node] = Target("postgres", "DSN", conninfo=dsn, sandbox=sandbox,
                                 hot_standby=(spec.topology == TopologyName.POSTGRES_STANDBY and node == "standby"))
    return Cluster(topology, "DSN", nodes)
