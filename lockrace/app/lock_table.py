"""The lock view's table: each client by letter and pid / thread id, its
transaction, what it holds and what it waits for."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from ..engine.lock_graph import LockGraph
from .palette import themed
from .status import seconds


def lock_table(graph: LockGraph, highlight: tuple[str, ...] = ()) -> Table:
    table = Table(box=None, padding=(0, 1), expand=True, header_style=themed("bold $lr-bar-text"))
    table.add_column("client", no_wrap=True)
    table.add_column("transaction", no_wrap=True)
    table.add_column("holds", ratio=2)
    table.add_column("waits for", ratio=3)
    for node in graph.nodes:
        style = themed("bold $lr-deadlock") if node.name in highlight else ("bold" if not node.foreign else "")
        waits = [w for w in graph.waits if w.waiter == node.name]
        holds = list(node.holds)
        waited_on = graph.waiters_on(node.name)
        if waited_on and not holds:
            holds = [f"what {', '.join(waited_on)} {'waits' if len(waited_on) == 1 else 'wait'} for"]
        if waits:
            who = ", ".join(w.blocker for w in waits)
            lock = waits[0].lock
            on = f" · {lock.describe()}" if lock is not None else ""
            wait = Text(f"{who}{on} ({seconds(node.waiting_ns)})", style=themed("$lr-blocked"))
        elif node.statement:
            wait = Text(f"nothing (running: {node.statement})", style=themed("$lr-running"))
        else:
            wait = Text("nothing", style=themed("$lr-muted"))
        txn = node.txn or ("outside the race" if node.foreign else "")
        if txn == "idle" and node.statement:
            txn = "autocommit"
        table.add_row(Text(node.label, style=style), txn, "; ".join(holds) or Text("—", style=themed("$lr-muted")),
                      wait)
    return table


class LockTable(Static):
    def show(self, graph: LockGraph, highlight: tuple[str, ...] = ()) -> None:
        self.update(lock_table(graph, highlight))
