"""F12: the lock view.  Every session by letter and pid / thread id, the clients
outside the race that block them, what each holds and waits for, and the wait-for
graph drawn as boxes and arrows; a deadlock's cycle in red.

Live: it is drawn from the race's own state (``engine.lock_graph``), which the
monitor keeps current; the app redraws it on each of the race's events and the
waits' durations on a short timer.  Nothing here asks the server.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from ..engine.lock_graph import LockGraph, cycle_text, lock_graph
from .keys_footer import KeysFooter
from .lock_table import LockTable
from .palette import themed
from .wait_graph import WaitGraph

REDRAW_S = 0.5


class LockView(Screen[None]):
    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("f12", "app.pop_screen", "Back", show=False),
        Binding("q", "app.pop_screen", "Back", show=False),
    ]
    DEFAULT_CSS = """
    LockView { layout: vertical; }
    #locks-title { height: 1; padding: 0 1; background: $boost; text-style: bold; }
    #locks-body { height: 1fr; padding: 0 1; }
    #locks-note { height: auto; padding: 0 1; }
    #locks-table { height: auto; margin: 1 0; }
    #locks-graph-title { height: 1; margin-top: 1; text-style: bold; }
    """

    def compose(self) -> ComposeResult:
        yield Static(id="locks-title")
        with VerticalScroll(id="locks-body"):
            yield Static("wait-for graph: an arrow points from a waiter to what it waits for", id="locks-graph-title")
            yield WaitGraph(id="locks-graph")
            yield LockTable(id="locks-table")
            yield Static(id="locks-note")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.redraw()
        self.set_interval(REDRAW_S, self.redraw)

    def graph(self) -> LockGraph | None:
        race = getattr(self.app, "race", None)
        return lock_graph(race) if race is not None else None

    def redraw(self) -> None:
        graph = self.graph()
        title = self.query_one("#locks-title", Static)
        server = getattr(self.app, "server_label", "")
        title.update(Text(f"Locks · {server} · live · F12 or Esc goes back", style="bold"))
        note = self.query_one("#locks-note", Static)
        if graph is None:
            self.query_one(LockTable).update("Not connected yet: wait for the server.")
            note.update("")
            return
        deadlock = getattr(self.app, "last_deadlock", None)
        live = graph.cycles()
        highlight = live[0] if live else (deadlock[0] if deadlock else ())
        self.query_one(LockTable).show(graph, highlight)
        self.query_one(WaitGraph).show(graph, highlight)
        lines = Text()
        if live:
            lines.append(f"deadlock: {cycle_text(live[0])} — each waits for the next; the server will fail "
                         "one of them to break the cycle\n", style=themed("bold $lr-deadlock"))
        if deadlock:
            cycle, victim = deadlock
            lines.append(f"last deadlock: {cycle_text(cycle)}; the server failed {victim}'s statement "
                         "(deadlock victim) and the others went on\n", style=themed("$lr-deadlock"))
        lines.append("What a session holds: what the others are reported waiting for, and what its own "
                     "statements took and keep until COMMIT or ROLLBACK (the rows it changed, LOCK TABLES, "
                     "on MariaDB/MySQL the tables its transaction used).", style=themed("$lr-muted"))
        note.update(lines)
