"""A server's sessions and lock waits at one moment, and the wait-for forest they make."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core.waitfor import find_cycles


@dataclass
class Client:
    """One client session on the server (a PostgreSQL backend, a MariaDB/MySQL thread)."""

    ident: int  # pid / thread id
    user: str = ""
    application: str = ""  # PostgreSQL's application_name; MariaDB/MySQL: the client host
    state: str = ""  # active, idle in transaction, Query, Sleep, ...
    query: str = ""  # the statement it runs (or ran last), shortened
    waiting_ms: float | None = None  # how long it has waited for a lock (None: it does not wait)
    xact_ms: float | None = None  # how long its transaction has been open
    name: str = ""  # a lockrace session's letter, when it is one
    kind: str = "client"  # client, thread (MariaDB/MySQL), or a server process (PostgreSQL's startup process, ...)
    system: bool = False  # the server's own thread (MariaDB/MySQL: event scheduler, Galera applier, ...)

    @property
    def label(self) -> str:
        """'A', 'pid 4711', 'thread 12': how the other lines name it."""
        return self.name or self.default_label

    @property
    def default_label(self) -> str:
        return f"{'pid' if self.kind != 'thread' else 'thread'} {self.ident}"


@dataclass
class Wait:
    """``waiter`` waits for ``blocker`` (None: the server does not say who)."""

    waiter: int
    blocker: int | None
    lock: str  # the object in plain words: "row accounts (0,1)", "relation accounts", ...
    mode: str  # the mode requested, as the server names it: ShareLock, AccessExclusiveLock, X,REC_NOT_GAP
    waiting_ms: float | None
    queued: bool = False
    """True: the blocker does not hold the lock either, it waits for it too, and this request
    is queued behind the blocker's pending one (a reader behind a pending ALTER)."""
    held: str = ""  # what the blocker holds on that object, when the server tells (RowExclusiveLock, ...)
    words: str = ""  # the whole wait as a learner reads it
    kind: str = ""  # the server's lock type: relation, tuple, transactionid, record, metadata, ...


@dataclass
class Snapshot:
    server: str  # "PostgreSQL 18.1", "MariaDB 10.11.6"
    where: str  # the server's address, without a password
    clients: list[Client] = field(default_factory=list)
    waits: list[Wait] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the server could not tell, and why
    node: str = ""  # a Galera node's name

    def client(self, ident: int | None) -> Client | None:
        return next((c for c in self.clients if c.ident == ident), None)

    def label(self, ident: int | None) -> str:
        if ident is None:
            return "an unnamed holder"
        c = self.client(ident)
        return c.label if c is not None else f"{'pid' if self.server.startswith('PostgreSQL') else 'thread'} {ident}"

    def name(self, names: dict[int, str]) -> None:
        """Give the clients in ``names`` (ident -> session letter) their letters."""
        for c in self.clients:
            if c.ident in names:
                c.name = names[c.ident]

    def waits_of(self, ident: int) -> list[Wait]:
        return [w for w in self.waits if w.waiter == ident]

    def blocked_by(self, ident: int | None) -> list[Wait]:
        return [w for w in self.waits if w.blocker == ident]

    def roots(self) -> list[int | None]:
        """The tops of the forest: blockers that wait for nothing themselves, then one
        member of each cycle (a deadlock about to be found) nothing else leads to."""
        waiting = {w.waiter for w in self.waits}
        tops: list[int | None] = []
        for w in self.waits:
            if w.blocker not in waiting and w.blocker not in tops:
                tops.append(w.blocker)
        reached = set()
        for top in tops:
            reached |= self._below(top)
        for w in sorted(self.waits, key=lambda w: w.waiter):
            if w.waiter not in reached:  # only on a cycle
                tops.append(w.waiter)
                reached |= self._below(w.waiter) | {w.waiter}
        return tops

    def _below(self, ident: int | None) -> set[int]:
        seen: set[int] = set()
        todo = [ident]
        while todo:
            for w in self.blocked_by(todo.pop()):
                if w.waiter not in seen:
                    seen.add(w.waiter)
                    todo.append(w.waiter)
        return seen

    def cycles(self) -> list[list[int]]:
        """Wait-for cycles (each once, starting at its smallest ident)."""
        return [list(c) for c in find_cycles((w.waiter, w.blocker) for w in self.waits if w.blocker is not None)]
