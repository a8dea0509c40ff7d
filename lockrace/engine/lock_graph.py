"""Who holds and who waits, from what a race's monitor has already learnt.

``lock_graph(race)`` reads the race's own state (each session's backend id,
transaction state, running statement and the waits the monitor reported for
it) and returns the wait-for graph: sessions by letter and pid / thread id,
clients outside the race that block them, every wait with the lock it is
for, and any cycle (a deadlock the server has not broken yet).  It asks the
server nothing and never blocks: the monitor's polling is what keeps it
current.  No Textual here; the app draws it (F12).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from time import perf_counter_ns

from ..core.events import LockInfo, StatementResult
from ..core.waitfor import cycle_text, find_cycles

__all__ = ["LockGraph", "LockNode", "WaitEdge", "cycle_text", "find_cycles", "lock_graph"]

_FOREIGN = re.compile(r"^another client \(((pid|thread) (\d+))(?: on (\S+))?\)$")
_IDENT = re.compile(r"^(pid|thread) (\d+)")


@dataclass(frozen=True)
class LockNode:
    """One client: a session of the race (A, B, ...) or another client that blocks one."""

    name: str  # "A", or "pid 4242" / "thread 17" for a client outside the race
    ident: int  # backend pid / connection id (0: not known)
    foreign: bool = False
    txn: str = ""  # idle, in transaction, failed transaction, closed ("" not known: a foreign client)
    statement: str = ""  # the statement running now (its first line), "" none
    waiting_ns: int = 0  # how long it has waited so far (0: not waiting)
    holds: tuple[str, ...] = ()  # what it holds, as far as lockrace can tell
    node: str = ""  # cluster races: the node it is on
    process: bool = False  # a server process rather than a client (the standby's replay)

    @property
    def label(self) -> str:
        """'A · pid 4242', 'pid 4242 (another client)'."""
        if self.foreign:
            return f"{self.name} (not in the race)" if not self.process else self.name
        word = "thread" if self.ident and self._mysql else "pid"
        return f"{self.name} · {word} {self.ident}" if self.ident else self.name

    _mysql: bool = field(default=False, repr=False, compare=False)


@dataclass(frozen=True)
class WaitEdge:
    waiter: str
    blocker: str
    lock: LockInfo | None = None


@dataclass(frozen=True)
class LockGraph:
    nodes: tuple[LockNode, ...]
    waits: tuple[WaitEdge, ...]
    taken_ns: int = 0

    def node(self, name: str) -> LockNode | None:
        return next((n for n in self.nodes if n.name == name), None)

    def blockers_of(self, name: str) -> list[str]:
        return [w.blocker for w in self.waits if w.waiter == name]

    def waiters_on(self, name: str) -> list[str]:
        return [w.waiter for w in self.waits if w.blocker == name]

    def cycles(self) -> list[tuple[str, ...]]:
        return find_cycles([(w.waiter, w.blocker) for w in self.waits])

    def with_wait(self, waiter: str, blockers, lock: LockInfo | None = None) -> "LockGraph":
        """This graph with ``waiter``'s waits replaced by ``blockers`` (a deadlock victim's
        last waits, which the server ended with its error)."""
        waits = tuple(w for w in self.waits if w.waiter != waiter) + tuple(
            WaitEdge(waiter, b, lock) for b in blockers)
        return LockGraph(self.nodes, waits, self.taken_ns)


def _first_line(sql: str) -> str:
    return " ".join(sql.split())


def lock_graph(race, now_ns: int | None = None) -> LockGraph:
    """The race's wait-for graph as its monitor last saw it (see the module's doc)."""
    now = perf_counter_ns() if now_ns is None else now_ns
    mysql = race.backend.family == "mysql"
    nodes: dict[str, LockNode] = {}
    waits: list[WaitEdge] = []
    held: dict[str, dict[str, list[str]]] = {}  # blocker -> what it holds that others wait for -> who
    for s in race.sessions.values():
        run = s.running
        if run is None or run.blocked_since is None:
            continue
        for blocker in run.blockers:
            name = blocker
            m = _FOREIGN.match(blocker)
            if m:
                name = m.group(1) + (f" on {m.group(4)}" if m.group(4) else "")
                if name not in nodes:
                    nodes[name] = LockNode(name, int(m.group(3)), foreign=True, node=m.group(4) or "")
            elif blocker not in race.sessions and name not in nodes:
                ident = _IDENT.match(blocker)
                nodes[name] = LockNode(name, int(ident.group(2)) if ident else 0, foreign=True,
                                       process=ident is None, node=s.node)
            waits.append(WaitEdge(s.name, name, run.lock))
            if run.lock is not None:  # the place, without the mode (the mode is the waiter's request)
                held.setdefault(name, {}).setdefault(lock_place(run.lock), []).append(s.name)
    for s in race.sessions.values():
        run = s.running
        holds = [f"{place} ({', '.join(who)} {'waits' if len(who) == 1 else 'wait'} for it)"
                 for place, who in held.get(s.name, {}).items()]
        if s.global_read_lock:
            holds.append("the global read lock (FLUSH TABLES WITH READ LOCK)")
        holds += [f"LOCK TABLES {t}" for t in sorted(s.locked_tables)]
        if s.txn == "in transaction":  # a failed one (PostgreSQL) released its locks with the error
            holds += [f"metadata lock on {t}" for t in sorted(s.tables_in_txn)
                      if f"metadata lock on {t}" not in " ".join(holds)]
            if s.wrote_in_txn:
                holds.append("the rows it changed")
        waiting = now - run.blocked_since if run is not None and run.blocked_since is not None else 0
        nodes[s.name] = LockNode(s.name, s.ident, txn=s.txn, statement=_first_line(run.sql) if run else "",
                                 waiting_ns=max(0, waiting), holds=tuple(holds), node=s.node, _mysql=mysql)
    for name, places in held.items():  # a client outside the race: what the race's sessions wait for
        node = nodes.get(name)
        if node is not None and node.foreign:
            nodes[name] = LockNode(node.name, node.ident, True, holds=tuple(
                f"{place} ({', '.join(who)} {'waits' if len(who) == 1 else 'wait'} for it)"
                for place, who in places.items()), node=node.node, process=node.process)
    order = [n for n in race.sessions] + [n for n in nodes if n not in race.sessions]
    return LockGraph(tuple(nodes[n] for n in order), tuple(waits), now)


def lock_place(lock: LockInfo) -> str:
    """What a lock is on, without the mode requested: 'accounts id=1', 'table accounts'."""
    text = lock.describe()
    if lock.mode and text.endswith(" " + lock.mode):
        text = text[: -len(lock.mode) - 1]
    return text


def deadlock_cycle(graph: LockGraph, victim: str, result: StatementResult) -> tuple[str, ...] | None:
    """The cycle a deadlock victim was part of: its last waits (from its result) with the
    others' waits as the monitor saw them when the server broke the cycle."""
    blockers = result.blocked_by or result.blockers_seen
    if not blockers:
        return None
    names = {n.name for n in graph.nodes}
    blockers = tuple(b if b in names else _foreign_name(b) for b in blockers)
    for cycle in graph.with_wait(victim, blockers, result.lock).cycles():
        if victim in cycle:
            return cycle
    return None


def _foreign_name(blocker: str) -> str:
    m = _FOREIGN.match(blocker)
    return m.group(1) if m else blocker
