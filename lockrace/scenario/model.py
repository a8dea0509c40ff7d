"""The one Scenario model every reader produces and every writer consumes.

A scenario is a set of sessions (A, B, ... or any names an isolation spec
uses), global setup/teardown SQL, steps (one SQL text run by one session) and
one or more permutations: the order in which steps are run.  Our own text
format has exactly one permutation, the order of the steps in the file;
PostgreSQL isolation specs may have many.

Expectations are attached to steps.  Each expectation may be limited to a
flavor ("postgres", "mysql" = any MySQL-family server, "mariadb", "mysql8"),
so that a scenario records where MariaDB and MySQL 8 really differ.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from ..core.serverwide import dialect_of, server_wide
from ..registry import CLUSTER_NODES, default_node, flavor_matches
from .expectations import LOCK_KINDS as LOCK_KINDS, OUTCOMES as OUTCOMES, TXN_STATES as TXN_STATES
from .expectations import TimeBound as TimeBound, describe as describe_expectation

# Engines, flavors and cluster nodes are the registry's (lockrace/registry.py).


class ScenarioKind(StrEnum):
    """Where a Scenario was read from."""

    SCENARIO = "scenario"  # lockrace's own .race format
    ISOLATION_SPEC = "isolation-spec"  # a PostgreSQL isolation .spec


@dataclass
class Expectation:
    """One thing a step must show once it completes.

    ``key`` is one of ``expectations.KEYS``: outcome, code, message, rows, row,
    rows_exactly, tag, blocked_by, completes_after, txn, skipped, notice, lock,
    took; each says how its value is read, checked and shown.  ``value`` is
    the text from the file (for ``row`` and ``rows_exactly`` the cells, split on
    ``|``; for ``outcome`` one outcome or several joined by `` | ``; for ``took``
    a ``TimeBound``).
    """

    key: str
    value: object
    flavor: str | None = None
    line: int | None = None

    def describe(self) -> str:
        return describe_expectation(self.key, self.value, self.flavor)


@dataclass
class AcrossSteps:
    """An expectation across steps: ``one-of: 5, 7 expect deadlock`` -- exactly one of
    those steps ends with that outcome (which one is the server's choice)."""

    steps: list[str]
    outcome: str
    flavor: str | None = None
    line: int | None = None

    def describe(self) -> str:
        scope = f"[{self.flavor}]" if self.flavor else ""
        return f"one-of{scope}: {', '.join(self.steps)} expect {self.outcome}"


@dataclass
class Step:
    name: str
    session: str
    sql: str
    expectations: list[Expectation] = field(default_factory=list)
    variants: dict[str, str] = field(default_factory=dict)
    """Per-engine SQL (``A[postgres]> ...;`` then ``A[mysql]> ...;``): flavor -> SQL.
    Empty: ``sql`` runs everywhere.  With variants, ``sql`` is the first one."""
    note: str = ""
    """Narration shown before the step (prose between statements)."""
    comment: str = ""
    """A trailing ``-- comment`` on the step line, shown beside the statement."""
    line: int | None = None

    def sql_for(self, flavor: str) -> str | None:
        """The SQL this step runs on ``flavor`` (most specific variant wins:
        mariadb/mysql8 > mysql); None when it has variants but none for ``flavor``."""
        if not self.variants:
            return self.sql
        for key in (flavor, "mysql" if flavor in ("mariadb", "mysql8") else None):
            if key in self.variants:
                return self.variants[key]
        return None

    def applicable(self, flavor: str) -> list[Expectation]:
        """The expectations that apply on ``flavor``.

        A flavor-specific expectation replaces a generic one with the same key
        (so ``code[mariadb]: 1205`` overrides ``code: 3572`` on MariaDB).
        """
        chosen: dict[str, list[Expectation]] = {}
        specificity: dict[str, int] = {}
        for exp in self.expectations:
            if not flavor_matches(exp.flavor, flavor):
                continue
            rank = 0 if exp.flavor is None else (1 if exp.flavor == "mysql" else 2)
            if rank > specificity.get(exp.key, -1):
                chosen[exp.key] = [exp]
                specificity[exp.key] = rank
            elif rank == specificity[exp.key]:
                chosen[exp.key].append(exp)
        return [e for group in chosen.values() for e in group]

    def expects_blocking(self, flavor: str) -> bool:
        """Will this step be left waiting while later steps run?

        Only ``completes-after`` says so: a step that merely expects to be
        blocked (``blocked-by``) and then to time out is waited for.
        """
        return any(e.key == "completes_after" for e in self.applicable(flavor))


@dataclass
class Blocker:
    """An isolation-spec permutation marker: ``step(*)``, ``step(other)``,
    ``step(other notices N)``."""

    step: str | None = None  # None for "*"
    notices: int | None = None


@dataclass
class PermutationEntry:
    step: str
    blockers: list[Blocker] = field(default_factory=list)


@dataclass
class SessionDef:
    name: str
    setup: list[str] = field(default_factory=list)
    teardown: list[str] = field(default_factory=list)


@dataclass
class Scenario:
    name: str
    title: str = ""
    lesson: str = ""
    engines: list[str] = field(default_factory=lambda: ["postgres"])
    source: str = ""
    setup: dict[str | None, list[str]] = field(default_factory=dict)
    """Setup SQL blocks per flavor (None = every flavor)."""
    teardown: dict[str | None, list[str]] = field(default_factory=dict)
    sessions: list[SessionDef] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    permutations: Sequence[list[PermutationEntry]] | None = None
    """None means: run the steps in file order (our format).  An isolation
    spec with no permutation lines gets every interleaving here, as a sequence
    that builds each one when it is asked for (spec_format.Interleavings)."""
    settings: dict[str, str] = field(default_factory=dict)
    """Server settings the scenario needs on a private server (e.g. MariaDB
    plugins); a server lockrace did not start is left alone."""
    epilogue: str = ""
    """A closing note after the last step."""
    nodes: dict[str, str] = field(default_factory=dict)
    """Cluster engines: session -> node name (``nodes: A=node1 C=node2``);
    sessions not named here sit where ``default_node`` puts them."""
    path: Path | None = None
    kind: ScenarioKind = ScenarioKind.SCENARIO
    across: list[AcrossSteps] = field(default_factory=list)
    """Expectations across steps (``one-of: 5, 7 expect deadlock``)."""
    explicit_permutations: bool = True
    """Isolation specs: False when the spec gave no permutation lines and the
    reader filled in every interleaving."""

    def for_flavor(self, flavor: str) -> "Scenario":
        """This scenario as it runs on ``flavor``: every step's ``sql`` is its
        variant for that flavor (steps without variants are shared unchanged)."""
        if not any(step.variants for step in self.steps):
            return self
        import copy

        out = copy.copy(self)
        out.steps = []
        for step in self.steps:
            if step.variants:
                step = copy.copy(step)
                step.sql = step.sql_for(flavor) or step.sql
            out.steps.append(step)
        return out

    def session_names(self) -> list[str]:
        names = [s.name for s in self.sessions]
        for step in self.steps:
            if step.session not in names:
                names.append(step.session)
        return names

    def session(self, name: str) -> SessionDef:
        for s in self.sessions:
            if s.name == name:
                return s
        s = SessionDef(name)
        self.sessions.append(s)
        return s

    def step(self, name: str) -> Step:
        for step in self.steps:
            if step.name == name:
                return step
        raise KeyError(name)

    def setup_for(self, flavor: str) -> list[str]:
        return _pick(self.setup, flavor)

    def teardown_for(self, flavor: str) -> list[str]:
        return _pick(self.teardown, flavor)

    def all_sql(self) -> list[str]:
        """Every piece of SQL the scenario (or spec) runs: setup and teardown blocks of
        every flavor, each session's own setup and teardown, every step and its variants."""
        out = [sql for blocks in (self.setup, self.teardown) for block in blocks.values() for sql in block]
        out += [sql for s in self.sessions for sql in (*s.setup, *s.teardown)]
        out += [sql for step in self.steps for sql in (step.sql, *step.variants.values())]
        return out

    def server_wide(self, engine: str) -> str | None:
        """The first server-wide statement (ALTER SYSTEM, SET GLOBAL, CREATE ROLE, ...,
        see core/serverwide.py) anywhere in the scenario as ``engine`` reads it; such a
        scenario runs only on servers lockrace started itself."""
        dialect = dialect_of(engine)
        for sql in self.all_sql():
            found = server_wide(sql, dialect)
            if found:
                return found
        return None

    def changes_server_settings(self) -> bool:
        """Does it run a server-wide statement on any of its engines?"""
        return any(self.server_wide(engine) for engine in self.engines)

    def runs_on(self, engine: str) -> bool:
        return engine in self.engines

    def placement(self, topology: str, names: list[str] | None = None) -> dict[str, str]:
        """session -> node for every session (or ``names``) on ``topology``."""
        names = names if names is not None else self.session_names()
        known = CLUSTER_NODES.get(topology)
        if known is None:  # a single server: no node to name
            return {}
        out = {}
        for index, name in enumerate(names):
            node = self.nodes.get(name)
            out[name] = node if node in known else default_node(topology, name, index)
        return out

    def order(self) -> Sequence[list[PermutationEntry]]:
        if self.permutations is not None:
            return self.permutations
        return [[PermutationEntry(step.name) for step in self.steps]]


def _pick(blocks: dict[str | None, list[str]], flavor: str) -> list[str]:
    """Most specific matching block wins: mariadb > mysql > generic."""
    for key in (flavor, "mysql" if flavor in ("mariadb", "mysql8") else None, None):
        if key in blocks:
            return blocks[key]
    return []
