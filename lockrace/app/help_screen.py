"""F1: every key and what every session state means."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from .status import STATE_HELP, STYLES
from .palette import themed

KEYS = [
    ("Enter", "run the typed SQL in the focused session"),
    ("Ctrl+N", "multi-line SQL editor for the focused session (Ctrl+R runs it, Esc cancels)"),
    ("Up / Down", "previous / next statement typed in that session (and in earlier runs)"),
    ("Ctrl+Space", "complete a table or column name of the sandbox (Tab stays the panel switch)"),
    ("Ctrl+Y / Alt+Y", "copy the focused panel's last statement and result / its whole transcript"),
    ("Alt+← / Alt+→", "scroll a wide result sideways (results are not wrapped)"),
    ("Tab / Shift+Tab", "next / previous session panel (or click a panel)"),
    ("Alt+A … Alt+D", "jump to session A … D; terminals sending Alt as Esc make Alt+B word-left:\n"
                      "use Tab or a click to reach B there"),
    ("F2 / Ctrl+C", "cancel the focused session's running statement (the server cancels it); Ctrl+C "
                    "works as in psql, and copies text selected in the input"),
    ("F3", "roll back the focused session's transaction"),
    ("F4", "reset the sandbox: fresh sessions, fresh tables (re-runs the scenario setup)"),
    ("F5", "scenario: run the next step"),
    ("F6", "scenario: run to the end"),
    ("F7", "scenario: auto-play on / off (one step every 1.5 s)"),
    ("F8", "switch engine: PostgreSQL ↔ MariaDB/MySQL (both servers stay up until quit)"),
    ("F9", "scenario picker: this engine's first; type to filter, Enter loads"),
    ("Ctrl+F", "back to the free-form sandbox (fresh sessions and tables)"),
    ("F10", "zoom the focused session's panel to the whole panel area (again: all four panels)"),
    ("F12", "locks, live: each session by pid / thread id, other clients blocking one, what each holds "
            "and waits for, the wait-for graph drawn (a deadlock's cycle in red); F12 / Esc back"),
    ("Timeline", "Tab or click to focus it, then Left / Right: earlier / later, + / -: zoom in / out,\n"
                 "Home: the whole race, End: follow the action again (the mouse wheel scrolls it too)"),
    ("Ctrl+O", "open a .race scenario or a PostgreSQL isolation .spec file by path"),
    ("Ctrl+T", "isolation spec: choose which permutation to step (restarts it from its setup)"),
    ("Ctrl+G", "choose which sessions the four panels show (more than four sessions)"),
    ("Ctrl+S", "save the race: asks where; writes .race and the .txt `lockrace run` prints"),
    ("Ctrl+L", "race lab: holder vs waiter in every wait mode, measured on this server"),
    ("Ctrl+P", "command palette (every action, and each scenario by name)"),
    ("F1", "this help"),
    ("Ctrl+Q", "quit: cancel statements, roll back, close connections, stop servers"),
]


def _grid() -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True)
    grid.add_column()
    return grid


def help_text() -> Group:
    keys = _grid()
    for key, what in KEYS:
        keys.add_row(Text(key, style="bold"), what)
    states = _grid()
    for key, what in STATE_HELP:
        label = "failed transaction (ROLLBACK needed)" if key == "failed transaction" else key
        if key == "blocked":
            label = "BLOCKED by A on accounts id=1"
        states.add_row(Text(f" {label} ", style=STYLES[key]), what)
    borders = _grid()
    borders.add_row(Text("┏━┓ heavy, blue", style=themed("bold $lr-focus")), "the focused panel (where typing goes)")
    borders.add_row(Text("┏╍┓ dashed, amber", style=themed("bold $lr-blocked")), "a blocked session; focused and blocked: heavy amber")
    lanes = _grid()
    lanes.add_row("▬", "a statement running (or how long it ran)")
    lanes.add_row("█", "the stretch the server reported it blocked")
    lanes.add_row("┃", "where its wait budget ends: start + lock_timeout / innodb_lock_wait_timeout / WAIT n")
    lanes.add_row("", "the timeline follows the action: the statements running now and their budgets (or the last\n"
                      "ones to finish), so a 100 ms budget stays readable however long the app has been open")
    heading = lambda text: Text(f"\n{text}", style="bold underline")  # noqa: E731
    return Group(heading("Keys"), keys, heading("Session states (badge colour and text)"), states,
                 heading("Panel borders"), borders, heading("Timeline"), lanes)


class HelpScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape", "dismiss", "Close"),
        Binding("f1", "dismiss", "Close", show=False),
        Binding("q", "dismiss", "Close", show=False),
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Static(help_text())

    def on_mount(self) -> None:
        self.query_one("#help").border_title = "lockrace help  (Esc closes)"
