"""The one list of what lockrace runs on: engines, topologies, flavors.

An *engine* is what ``--engine`` names and a scenario's ``engines:`` line
lists: ``postgres``, ``mysql``, ``galera``, ``postgres-standby``.  Each engine
runs on a *topology* (``single``: one server; ``galera``, ``postgres-standby``:
clusters of named nodes) and speaks one *family* of SQL (``postgres`` or
``mysql``: the driver and the dialect).  A *flavor* is the concrete server an
expectation may be written for: ``postgres``, ``mariadb``, ``mysql8``, or
``mysql`` for any server of the MySQL family.

``Engine``, ``Family``, ``Flavor`` and ``TopologyName`` are ``StrEnum``: each
member equals its string, so scenario files, JSON and saved races read and
write the same words as before.

Everything else reads this module: the command line (choices, flags), the
scenario readers (accepted engines, flavors, nodes), the server pool (what
"starting ..." says), servers/choose.py (how each engine is started:
``STARTERS``, keyed by ``Engine``) and the backends (a cluster's label; its
hooks: ``backends.CLUSTER_HOOKS``, keyed by ``TopologyName``).
``tests/test_registry.py`` checks that those tables cover every entry here.

This module imports nothing of lockrace's: every layer may read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Family(StrEnum):
    """The SQL a server speaks: its driver and dialect."""

    POSTGRES = "postgres"
    MYSQL = "mysql"


class Flavor(StrEnum):
    """What an expectation may be limited to (``MYSQL``: any MySQL-family server)."""

    POSTGRES = "postgres"
    MYSQL = "mysql"
    MARIADB = "mariadb"
    MYSQL8 = "mysql8"


class Engine(StrEnum):
    POSTGRES = "postgres"
    MYSQL = "mysql"
    GALERA = "galera"
    POSTGRES_STANDBY = "postgres-standby"


class TopologyName(StrEnum):
    SINGLE = "single"
    GALERA = "galera"
    POSTGRES_STANDBY = "postgres-standby"


@dataclass(frozen=True)
class Topology:
    """How many servers an engine runs on, and their names in order.

    The first node is where setup and teardown run (Galera replicates them; a
    standby is read-only).  ``single`` has one unnamed node: its races seat no
    session anywhere in particular."""

    name: TopologyName
    nodes: tuple[str, ...]

    @property
    def cluster(self) -> bool:
        return self.name is not TopologyName.SINGLE


TOPOLOGIES: dict[TopologyName, Topology] = {
    TopologyName.SINGLE: Topology(TopologyName.SINGLE, ("",)),
    TopologyName.GALERA: Topology(TopologyName.GALERA, ("node1", "node2")),
    TopologyName.POSTGRES_STANDBY: Topology(TopologyName.POSTGRES_STANDBY, ("primary", "standby")),
}


@dataclass(frozen=True)
class EngineSpec:
    name: Engine
    label: str  # what the user reads: "PostgreSQL 18", "MariaDB Galera"
    family: Family
    topology: TopologyName
    flavors: tuple[Flavor, ...]  # the concrete flavors its servers may be
    flag: str  # command-line flag with a DSN (clusters: one per node, comma-separated)
    env: str  # environment variable with the same
    private: str  # what lockrace starts when no DSN is given, for "starting ..."
    short: str  # its name in a short sentence ("no Galera server to read")
    dirs: tuple[str, ...]  # the temp dirs of its private servers, lockrace-KIND-* (each server class's ``kind``)
    needs: str = ""  # what a private server or cluster needs on the machine, for error messages

    @property
    def nodes(self) -> tuple[str, ...]:
        return TOPOLOGIES[self.topology].nodes

    @property
    def cluster(self) -> bool:
        return TOPOLOGIES[self.topology].cluster

    @property
    def dest(self) -> str:
        """The argparse attribute of ``flag`` (``--pg`` -> ``pg``)."""
        return self.flag.lstrip("-").replace("-", "_")


ENGINES: dict[Engine, EngineSpec] = {
    Engine.POSTGRES: EngineSpec(
        Engine.POSTGRES, "PostgreSQL 18", Family.POSTGRES, TopologyName.SINGLE, (Flavor.POSTGRES,),
        "--pg", "LOCKRACE_PG_DSN", "embedded PostgreSQL 18", "PostgreSQL", ("postgres",),
    ),
    Engine.MYSQL: EngineSpec(
        Engine.MYSQL, "MariaDB/MySQL", Family.MYSQL, TopologyName.SINGLE, (Flavor.MARIADB, Flavor.MYSQL8),
        "--mysql", "LOCKRACE_MYSQL_DSN", "a private MariaDB/MySQL server", "MariaDB/MySQL", ("mysql",),
    ),
    Engine.GALERA: EngineSpec(
        Engine.GALERA, "MariaDB Galera", Family.MYSQL, TopologyName.GALERA, (Flavor.MARIADB,),
        "--galera", "LOCKRACE_GALERA_DSNS", "a private 2-node MariaDB Galera cluster", "Galera", ("galera",),
        needs="mariadbd and the galera-4 provider (apt-get install mariadb-server galera-4 rsync)",
    ),
    Engine.POSTGRES_STANDBY: EngineSpec(
        Engine.POSTGRES_STANDBY, "PostgreSQL primary + hot standby", Family.POSTGRES, TopologyName.POSTGRES_STANDBY,
        (Flavor.POSTGRES,), "--standby", "LOCKRACE_STANDBY_DSNS", "a private PostgreSQL primary and hot standby",
        "PostgreSQL primary/standby", ("pg-primary", "pg-standby"),
    ),
}

ENGINE_NAMES: tuple[str, ...] = tuple(ENGINES)
"""Every engine, in the order help texts list them."""
SINGLE_ENGINES: tuple[str, ...] = tuple(e for e, spec in ENGINES.items() if not spec.cluster)
"""The engines of one server (isolation specs, bench, rehearse)."""
CLUSTER_ENGINES: tuple[str, ...] = tuple(e for e, spec in ENGINES.items() if spec.cluster)
FLAVORS: tuple[str, ...] = tuple(Flavor)
CLUSTER_NODES: dict[str, tuple[str, ...]] = {t: topo.nodes for t, topo in TOPOLOGIES.items() if topo.cluster}
"""Cluster topology -> its nodes in order (the single server has none to name)."""


def engine(name: str) -> EngineSpec:
    """The engine called ``name`` (ValueError: no such engine)."""
    return ENGINES[Engine(name)]


def topology_of(name: str) -> Topology:
    """An engine's or topology's topology (``single`` for one server)."""
    if name in ENGINE_NAMES:
        return TOPOLOGIES[ENGINES[Engine(name)].topology]
    return TOPOLOGIES[TopologyName(name)]


def cluster_engine(topology: str) -> EngineSpec:
    """The engine that runs on cluster ``topology``."""
    return next(spec for spec in ENGINES.values() if spec.topology == topology)


def flavor_matches(wanted: str | None, flavor: str) -> bool:
    """Does an expectation written for ``wanted`` apply on a server of ``flavor``?

    ``flavor`` is the concrete server flavor: postgres, mariadb or mysql8.
    """
    if wanted is None:
        return True
    if wanted == flavor:
        return True
    return wanted == Flavor.MYSQL and flavor in (Flavor.MARIADB, Flavor.MYSQL8)


def default_node(topology: str, session: str, index: int) -> str:
    """Where a session sits when the scenario does not say: A and B on the
    first node, C and D on the second; any other session by its position
    (0, 1 on the first node, 2, 3 on the second, and so on, round the nodes)."""
    nodes = CLUSTER_NODES[topology]
    if session in ("A", "B", "C", "D"):
        index = "ABCD".index(session)
    return nodes[(index // 2) % len(nodes)]
