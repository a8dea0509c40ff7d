"""The lockrace app: four session panels on a real server, a wait-budget
timeline, scenario stepping and free-form races.

The app is a thin consumer of the engine: it subscribes to a Race's events
(called on this same event loop) and updates widgets from them.  Every
database call is an awaited engine coroutine run in a worker, so nothing
blocks the UI; servers are started in a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from pathlib import Path
from typing import Iterable

from rich.cells import cell_len
from rich.text import Text
from textual import work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.dom import DOMNode
from textual.containers import Container, Grid, VerticalScroll
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.widgets import Header, Static

from .. import exitguard
from ..core.events import Event, ServerNote, StatementBlocked, StatementFinished, StatementStarted
from ..core.serverwide import dialect_of, refuse_server_wide, server_wide
from ..engine.lock_graph import deadlock_cycle, lock_graph
from ..engine.race import Race, SessionBusy
from ..engine.scheduler import Entry, EntryKind
from ..render.transcript import names_text
from ..scenario.library import builtins
from ..scenario.model import Scenario, ScenarioKind, Step
from ..servers.cluster import Cluster
from ..servers.target import Target
from .help_screen import HelpScreen
from .completion import SandboxNames
from .history import History
from .keys_footer import KeysFooter
from .lock_view import LockView
from .player import Player
from .recorder import Recorder
from .player import permutation_text
from .scenario_picker import ScenarioPicker
from ..registry import Engine
from ..runtime.options import ServerChoice
from ..runtime.races import new_race, server_pool
from .session_log import SessionLog
from .session_panel import SessionPanel
from .spec_screens import PermutationPicker, SessionChooser
from .timeline import Timeline, TimelineModel
from . import palette
from .palette import themed
from .terminal_watch import TerminalWatch, input_terminal

SESSION_NAMES = ("A", "B", "C", "D")  # free-form sessions, and the ids of the four panel slots
# Redraw interval by the age of the youngest running statement: what a frame
# shows changes slowly during a long wait, and every frame costs CPU (each is
# ~6-10 ms of Textual rendering on a small machine).
REDRAW_BY_AGE = ((2.0, 0.2), (10.0, 0.5), (float("inf"), 1.0))  # (younger than s, redraw every s)
WIDE_COLUMNS = 170  # at or above this width the four panels stand side by side
COMPACT_ROWS = 34  # below this height the timeline puts its axis labels on the axis line
NO_HEADER_ROWS = 30  # below this height the header line goes (its text moves to the timeline's title)

FREE_FORM_SETUP = [
    "CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL);\n"
    "INSERT INTO accounts VALUES (1, 100), (2, 100), (3, 100);\n"
    "CREATE TABLE jobs (id int PRIMARY KEY, task text NOT NULL);\n"
    "INSERT INTO jobs VALUES (1, 'send email'), (2, 'resize image'), (3, 'build report');"
]
FREE_FORM_SETUP_MYSQL = [
    "CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL) ENGINE=InnoDB;\n"
    "INSERT INTO accounts VALUES (1, 100), (2, 100), (3, 100);\n"
    "CREATE TABLE jobs (id int PRIMARY KEY, task text NOT NULL) ENGINE=InnoDB;\n"
    "INSERT INTO jobs VALUES (1, 'send email'), (2, 'resize image'), (3, 'build report');"
]


# the free-form bar's hint, in the order its parts give way on a small terminal (whole parts only)
FREE_FORM_HINTS = [
    "sandbox tables: accounts(id, balance) rows 1-3, jobs(id, task) rows 1-3.",
    "Type SQL in a panel and press Enter;",
    "F1 help;",
    "Tab/Alt+A..D switch panels;",
    "F9 loads a scenario;",
    "F12 shows the locks.",
]


def fit_words(parts: list[str], room: int) -> str:
    """As many of ``parts`` (in order of need) as fit in ``room`` cells, in their own order."""
    chosen: list[str] = []
    for part in parts:
        if cell_len("  " + "  ".join(chosen + [part])) <= room:
            chosen.append(part)
    text = "  " + " ".join(chosen)
    return text[:-1] + "." if text.endswith(";") else text


def free_form(engine: str) -> Scenario:
    """The scenario a free-form race starts from: two small tables, no steps."""
    return Scenario(
        name="free-form",
        title="Free-form race",
        engines=[engine],
        lesson="",
        setup={None: list(FREE_FORM_SETUP), "mysql": list(FREE_FORM_SETUP_MYSQL)},
        teardown={None: ["DROP TABLE IF EXISTS accounts;\nDROP TABLE IF EXISTS jobs;"]},
    )


def session_names(scenario: Scenario | None) -> list[str]:
    """The race's sessions: an isolation spec's own (s1, s2, ...), otherwise A-D plus any others a scenario uses."""
    if scenario is not None and scenario.kind == ScenarioKind.ISOLATION_SPEC:
        return scenario.session_names()
    names = list(SESSION_NAMES)
    for name in scenario.session_names() if scenario is not None else []:
        if name not in names:
            names.append(name)
    return names


def _read_esc_b_as_alt_b() -> None:
    """A terminal sends Alt+B as ESC b, which Textual's key table reads as Ctrl+Left
    (iTerm's "natural text editing" word jump): Alt+B moved the SQL input's cursor
    instead of switching to session B.  Without that entry ESC b is "alt+b", as ESC
    c is "alt+c".  (Ctrl+Left itself, ESC [1;5D, stays a word jump.)"""
    from textual._ansi_sequences import ANSI_SEQUENCES_KEYS
    from textual.keys import Keys

    if ANSI_SEQUENCES_KEYS.get("\x1bb") == (Keys.ControlLeft,):
        del ANSI_SEQUENCES_KEYS["\x1bb"]  # type: ignore[attr-defined]


class LockraceApp(App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "lockrace"
    BINDINGS = [
        Binding("f1", "help", "Help"),
        Binding("f2", "cancel", "Cancel stmt"),
        Binding("f3", "rollback", "Rollback"),
        Binding("f4", "reset", "Reset"),
        Binding("f5", "step", "Step"),
        Binding("f6", "run_to_end", "Run all"),
        Binding("f7", "autoplay", "Auto-play"),
        Binding("f8", "switch_engine", "Engine"),
        Binding("f9", "pick_scenario", "Scenarios"),
        Binding("ctrl+f", "free_form", "Free-form", show=False),
        Binding("ctrl+s", "save", "Save"),
        Binding("ctrl+o", "open_file", "Open file", show=False),
        Binding("ctrl+t", "pick_permutation", "Permutation", show=False),
        Binding("ctrl+g", "show_sessions", "Shown sessions", show=False),
        Binding("ctrl+l", "lab", "Lab", show=False),
        Binding("ctrl+n", "editor", "Multi-line", show=False),
        Binding("ctrl+q", "quit", "Quit", priority=True),
        Binding("f10", "zoom", "Zoom"),
        Binding("f12", "lock_view", "Locks"),
        Binding("ctrl+y", "copy_result", "Copy result", show=False),
        Binding("alt+y", "copy_log", "Copy log", show=False, priority=True),
        Binding("alt+a", "focus_session('A')", "Session A", show=False, priority=True),
        Binding("alt+b", "focus_session('B')", "Session B", show=False, priority=True),
        Binding("alt+c", "focus_session('C')", "Session C", show=False, priority=True),
        Binding("alt+d", "focus_session('D')", "Session D", show=False, priority=True),
    ]

    def get_theme_variable_defaults(self) -> dict[str, str]:
        """lockrace's colours (palette.tcss) as theme variables: app.tcss uses them as $lr-NAME."""
        return {**super().get_theme_variable_defaults(), **palette.VARIABLES}

    def __init__(
        self,
        engine: str = "postgres",
        scenario: Scenario | None = None,
        pg: str | None = None,
        mysql: str | None = None,
        targets: dict[str, Target | Cluster] | None = None,
        pending: dict | None = None,
        servers: ServerChoice | None = None,
        save_dir: Path | None = None,
        autoplay_delay: float = 1.5,
        step_timeout: float = 15.0,
        history_dir: Path | None = None,
        colours: dict[str, str] | None = None,
    ):
        super().__init__()
        _read_esc_b_as_alt_b()
        self.engine = engine if scenario is None or scenario.runs_on(engine) else scenario.engines[0]
        self.initial_scenario = scenario
        self.farewell: list[str] = []  # what closing had to leave behind, said after the screen is gone
        dsns = dict((servers or ServerChoice()).dsns)
        for name, dsn in ((Engine.POSTGRES, pg), (Engine.MYSQL, mysql)):  # pg=, mysql=: a DSN for that engine
            if dsn is not None:
                dsns[name] = dsn
        self.pool = server_pool(ServerChoice(dsns), targets, pending, say=self.farewell.append)
        self.save_dir = save_dir or Path.cwd()
        self.autoplay_delay = autoplay_delay
        self.step_timeout = step_timeout
        self.race: Race | None = None
        self.player: Player | None = None
        self.base: Scenario = free_form(self.engine)
        self.flavor = "postgres"
        self.server_label = ""
        self.timeline_model = TimelineModel(list(SESSION_NAMES))
        self.logs: dict[str, SessionLog] = {name: SessionLog(name) for name in SESSION_NAMES}
        self.shown: list[str] = list(SESSION_NAMES)  # the sessions the four panels show, in order
        self.permutation = 0  # the loaded scenario's permutation being stepped
        self.recorder = Recorder(self.engine, self.flavor)
        self.ready = asyncio.Event()  # set each time a race is open and the UI interactive
        self.autoplaying = False
        self.closing = False
        self.pool_closed = False  # the sandbox dropped (DSN servers), the private servers stopped
        self.startup_s: float | None = None
        self._t_start = time.perf_counter()
        self._last_session = "A"
        self._ticker: asyncio.Task | None = None
        self._scenarios: list[Scenario] | None = None
        self._bar_shown: tuple = ()
        self.zoomed: str | None = None  # the session whose panel is zoomed (F10)
        self._size_seen = None  # the latest resize event's size (see terminal_size)
        self.history_dir = history_dir  # statements kept across runs (None: this run only)
        self.colours = colours or {}  # $lr-NAME -> colour over the theme's (a colours file)
        self.history: History | None = None
        self.sandbox_names = SandboxNames()  # for Ctrl+Space in an input line
        self.last_deadlock: tuple[tuple[str, ...], str] | None = None  # (cycle, victim) of this race's latest
        self._live_cycle: tuple[str, ...] = ()  # the latest wait-for cycle seen, until the server breaks it

    # ------------------------------------------------------------ layout
    def compose(self) -> ComposeResult:
        yield Header()
        box = VerticalScroll(id="scenario-box")  # a long lesson scrolls (mouse wheel) rather than being cut
        box.can_focus = False  # Tab goes from panel to panel
        with box:
            yield Static(id="scenario-bar")
        yield Static(id="banner")
        with Grid(id="panels"):
            for name in SESSION_NAMES:
                yield SessionPanel(name)
        with Container(id="timeline-box"):
            yield Timeline(self.timeline_model, id="timeline")
        yield KeysFooter()

    @property
    def panels(self) -> dict[str, SessionPanel]:
        """The panels in use, by the session each shows (a zoom hides the others but they keep drawing)."""
        return {p.session: p for p in getattr(self, "_panel_list", [])[: len(self.shown)]}

    @property
    def timeline(self) -> Timeline:
        return self.query_one(Timeline)

    def on_mount(self) -> None:
        if exitguard.app_guard is not None:  # a signal ends the app within moments, whatever the server does
            exitguard.app_guard.chain_sigint()
            exitguard.app_guard.stoppers.append(self.pool)
        self._panel_list = list(self.query(SessionPanel))
        for panel in self._panel_list:
            self.logs[panel.session] = panel.session_log
        self.sub_title = self.pool.starting_text(self.engine)
        self._apply_size()
        self._show_bar()
        self.query_one("#input-A").focus()
        self._take_colours()
        fd = None if self.is_headless else input_terminal()
        if fd is not None:  # a terminal that goes away without a SIGHUP ends the app as one would
            self.set_interval(0.5, TerminalWatch(fd).check, name="terminal-watch")
        self.open_race(self.engine, self.initial_scenario)

    def _take_colours(self) -> None:
        """Styles built in Python follow the theme in use, and a colours file
        ($LOCKRACE_COLOURS) becomes a theme of its own over the current one."""
        self.theme_changed_signal.subscribe(self, self._theme_changed)
        if self.colours:
            base = self.current_theme
            self.register_theme(dataclasses.replace(base, name="lockrace-colours",
                                                    variables={**base.variables, **self.colours}))
            self.theme = "lockrace-colours"
        palette.use_theme(self.get_css_variables())

    def _theme_changed(self, _theme) -> None:
        palette.use_theme(self.get_css_variables())
        for widget in self.screen.walk_children():
            widget.refresh()
        self._show_bar()

    def on_resize(self, event) -> None:
        # this handler runs before App's own, which is where ``self.size`` becomes the new
        # size: laid out from ``self.size`` here, each resize applied the previous one
        self._size_seen = event.size
        self._apply_size()
        self._show_bar()

    def _apply_size(self) -> None:
        """Fit the layout to the terminal: 4x1 panels from WIDE_COLUMNS, 2x2 below; on short
        terminals no header line and a one-line timeline axis; a zoomed panel alone."""
        width, height = self.terminal_size
        grid = self.query_one("#panels")
        panels = getattr(self, "_panel_list", [])
        zoomed = self.zoomed if self.zoomed in self.panels else None
        for panel in panels[: len(self.shown)]:  # set with the grid's size, in one layout pass
            panel.display = zoomed is None or panel.session == zoomed
        count = 1 if zoomed is not None else min(len(self.shown), len(panels)) or 4
        side_by_side = width >= WIDE_COLUMNS or count <= 2
        grid.set_class(side_by_side, "wide")
        grid.styles.grid_size_columns = count if side_by_side else 2
        grid.styles.grid_size_rows = 1 if side_by_side else 2
        self.query_one(Header).display = height >= NO_HEADER_ROWS
        box = self.query_one("#scenario-box")
        box.styles.max_height = 2 if height < NO_HEADER_ROWS else 4 if height < 40 else 6
        timeline = self.timeline
        timeline.set_compact(height < COMPACT_ROWS)
        self._timeline_title()

    @property
    def terminal_size(self) -> tuple[int, int]:
        """The terminal's size as of the latest resize event (``self.size`` lags behind it
        while that event is being handled)."""
        size = getattr(self, "_size_seen", None) or self.size
        return size.width, size.height

    def _timeline_title(self) -> None:
        timeline = self.timeline
        legend = "▬ running █ blocked ┃ budget ends"
        parts = ["wait-budget timeline", legend]
        if not self.query_one(Header).display and self.sub_title:  # the header's text, where it still shows
            server, *rest = self.sub_title.split(" · ")
            legend = "▬ running █ blocked ┃ budget"
            parts = [server, legend, *rest]  # in order of need; shown in the header's order
        # whole parts only: a title cut by the border ends mid-word
        room = self.terminal_size[0] - 4
        chosen = [parts[0]]
        for part in parts[1:]:
            if cell_len(" · ".join(chosen + [part])) <= room:
                chosen.append(part)
        if legend in chosen:  # the legend last, as the header's text comes first
            chosen.remove(legend)
            chosen.append(legend)
        timeline.set_title(" · ".join(chosen))

    def watch_sub_title(self) -> None:
        if hasattr(self, "_panel_list"):
            self._timeline_title()

    def action_zoom(self) -> None:
        """Zoom the focused session's panel to the whole panel area, or back to all of them."""
        name = self.focused_session()
        self.zoomed = None if self.zoomed is not None else name
        self._apply_size()
        panel = self.panels.get(name)
        if panel is not None:
            panel.input.focus()
            if panel.session_log.entries:
                panel.call_after_refresh(panel.redraw, panel.session_log)  # rewrap at the new width

    def _banner(self, text: str | None, style: str = "bold") -> None:
        banner = self.query_one("#banner", Static)
        banner.update(Text(text, style=style) if text else "")
        banner.display = bool(text)

    def _show_bar(self) -> None:
        bar = self.query_one("#scenario-bar", Static)
        text = Text()
        player = self.player
        if player is None:
            text.append(" Free-form race ", style=themed("bold $lr-on-badge on $lr-free-label"))
            width, height = self.terminal_size
            lines = 2 if height < NO_HEADER_ROWS else 4
            text.append(fit_words(FREE_FORM_HINTS, (width - 2) * lines - 18 - 2 * lines),
                        style=themed("$lr-bar-text"))
        elif player.is_spec:
            self._spec_bar(text, player)
        else:
            sc = player.scenario
            text.append(f" {sc.name} ", style=themed("bold $lr-on-badge on $lr-accent"))
            text.append(f"  {sc.title}", style="bold")
            met, bad = player.met()
            state = self._progress_words(player)
            text.append(f"   {state} · ", style=themed("$lr-bar-text"))
            text.append(f"✓ {met} met", style=themed("bold $lr-success"))
            text.append(" · ")
            text.append(f"✗ {bad} not met", style=themed("bold $lr-failure") if bad else themed("$lr-muted"))
            self._play_keys(text, player)
            if sc.lesson:
                text.append("\n")
                text.append(" ".join(sc.lesson.split()), style=themed("italic $lr-lesson"))  # one paragraph in the bar
        scenario = player.scenario.name if player is not None else None
        if player is not None and len(self.logs) > len(self._panel_list):
            self._sessions_line(text, player)
        if (scenario, text.plain) == self._bar_shown:
            return
        # a new scenario may change the bar's height (so may a spec's hidden next step); progress updates do not
        before = self._bar_shown[1].count("\n") if self._bar_shown else -1
        bar.update(text, layout=scenario != (self._bar_shown or (None,))[0] or text.plain.count("\n") != before)
        self._bar_shown = (scenario, text.plain)

    @staticmethod
    def _progress_words(player: Player) -> str:
        if player.finished:
            return "finished"
        if player.busy and player.current is not None:  # launched, not yet done: F5 waits for it
            return f"step {player.position}/{player.total} in progress"
        return f"next step {player.position + 1}/{player.total}"

    def _play_keys(self, text: Text, player: Player) -> None:
        if self.autoplaying:
            text.append("   ▶ auto-play", style=themed("bold $lr-auto-play"))
        if not player.finished:
            text.append("   F5 step · F6 to end · F7 auto · ^F free-form", style=themed("$lr-muted"))
        else:
            text.append("   F4 restarts it; keep typing freely; ^F free-form sandbox", style=themed("$lr-muted"))

    def _spec_bar(self, text: Text, player: Player) -> None:
        """The scenario bar for an isolation spec: which permutation, how far, which keys."""
        sc = player.scenario
        text.append(f" {sc.name} ", style=themed("bold $lr-on-badge on $lr-spec-label"))
        text.append(f"  {sc.title}", style="bold")
        state = self._progress_words(player)
        text.append(f"   {state}", style=themed("$lr-bar-text"))
        self._play_keys(text, player)
        text.append("\n")
        text.append(f" permutation {player.permutation + 1}/{player.permutations}: ", style="bold")
        for i, entry in enumerate(player.entries):
            style = themed("bold $lr-on-badge on $lr-accent") if i == player.position and not player.finished else (
                themed("$lr-muted") if i < player.position else "")
            text.append(permutation_text([entry]), style=style)
            text.append(" ")
        if player.permutations > 1:
            text.append("  Ctrl+T picks another", style=themed("$lr-muted"))

    def _sessions_line(self, text: Text, player: Player) -> None:
        """Every session of the race, the shown ones marked, when there are more than four."""
        text.append("\n sessions: ", style="bold")
        for name in self.logs:
            if name in self.shown:
                text.append(f"[{name}]", style=themed("bold $lr-accent-cool"))
            else:
                text.append(f" {name} ", style=themed("$lr-muted"))
            text.append(" ")
        text.append(" [ ] shown · Ctrl+G chooses which four", style=themed("$lr-muted"))
        step = player.next_step
        if step is not None and step.session not in self.shown:
            first = step.sql.splitlines()[0] if step.sql else ""
            text.append(f"\n ▶ next, F5: step {player.position + 1}/{player.total}  {step.session}> {first}"
                        f"   (session {step.session} is not shown)", style=themed("bold $lr-hidden-step on $lr-hidden-step-bg"))

    # ------------------------------------------------------------ race life
    @work(exclusive=True, group="race")
    async def open_race(self, engine: str, scenario: Scenario | None = None, permutation: int = 0) -> None:
        """Fresh sessions on ``engine`` (starting its server if needed), fresh sandbox, optional scenario
        (stepped in its ``permutation``-th order)."""
        self.ready.clear()
        self._stop_play()
        await self._close_race()
        self.engine = engine
        self.permutation = permutation
        if engine not in self.pool.backends:
            self._banner(f"⏳ {self.pool.starting_text(engine)}", themed("bold $lr-warning"))
            self.sub_title = self.pool.starting_text(engine)
        for panel in self.panels.values():
            panel.reset(self.flavor)
        try:
            backend = await self.pool.backend(engine)
        except Exception as exc:
            message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            self._banner(f"✗ could not start or reach {engine}: {message}   (F8 tries the other engine, Ctrl+Q quits)",
                         themed("bold $lr-failure"))
            self.sub_title = f"no server · engine: {engine}"
            return
        wide = scenario.server_wide(engine) if scenario is not None and not self._owned(engine) else None
        if wide and scenario is not None:
            self.notify(refuse_server_wide(scenario.name, wide), severity="error")
            scenario = None  # the free-form sandbox instead
        names = session_names(scenario)
        base = scenario if scenario is not None else free_form(engine)
        race, placement = new_race(backend, base, names)
        race.subscribe(self._on_race_event)
        self.flavor = backend.flavor
        self.server_label = f"{backend.server_name} ({self.pool.origin(engine)})"
        self.base = base
        self.sandbox_names = SandboxNames()
        for sql in base.setup_for(self.flavor):
            self.sandbox_names.read(sql)
        if self.history is None or self.history.engine != engine:
            self.history = await asyncio.to_thread(History, self.history_dir, engine)
            for panel in self._panel_list:
                panel.input.history = list(self.history.entries)
                panel.input.remember_position()
        heading = f"-- {self.server_label}"
        self.timeline_model.clear(names)
        self.timeline_model.nodes = placement
        self.timeline.update()
        self.timeline.refresh(layout=True)  # the number of lanes sets its height
        self.recorder.clear(engine, self.flavor, base)
        self.logs = {}
        for name in names:
            self.logs[name] = SessionLog(name, self.flavor)
            self.logs[name].node = placement.get(name, "")
            self.logs[name].write(heading + (f" · {placement[name]}" if name in placement else ""), "dim italic")
        self._show_sessions(names[: len(self._panel_list)])
        try:
            await race.open()
            self.race = race
            player = Player(race, base, self._on_entry, step_timeout=self.step_timeout, permutation=permutation)
            await player.prepare()
            if scenario is not None:
                self.player = player
            else:
                player.detach()
                self.player = None
        except Exception as exc:
            message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            self._banner(f"✗ {message}", themed("bold $lr-failure"))
            return
        self.sub_title = f"{self.server_label} · engine: {engine}"
        self._banner(None)
        self._show_bar()
        self._show_next()
        if self.startup_s is None:
            self.startup_s = time.perf_counter() - self._t_start
        self.ready.set()

    async def _close_race(self) -> None:
        race, self.race = self.race, None
        self.last_deadlock = None
        self._live_cycle = ()
        if self.player is not None:
            self.player.detach()
            self.player = None
        if race is not None:
            race.unsubscribe(self._on_race_event)
            with contextlib.suppress(Exception):
                await race.close()

    def _on_race_event(self, event: Event) -> None:
        if isinstance(event, ServerNote):
            severity: SeverityLevel = "error" if event.level == "error" else \
                "warning" if event.level == "warning" else "information"
            self.notify(event.text, severity=severity)
            return
        panel = self.panels.get(event.session)
        if panel is not None:
            panel.handle(event)
        elif event.session is not None:  # a session no panel shows keeps its transcript all the same
            log = self.logs.get(event.session)
            if log is None:
                log = self.logs[event.session] = SessionLog(event.session, self.flavor)
                log.node = event.node
            log.apply(event)
        if event.node and event.session and event.session not in self.timeline_model.nodes:
            self.timeline_model.nodes[event.session] = event.node
        self.timeline_model.apply(event)
        self.recorder.apply(event)
        if isinstance(event, StatementFinished) and not event.result.code:
            self.sandbox_names.read(event.sql)  # a table made or changed: its names complete too
        if isinstance(event, StatementBlocked) and self.race is not None:
            cycles = lock_graph(self.race).cycles()  # a cycle the server has not broken yet
            self._live_cycle = cycles[0] if cycles else self._live_cycle
        if isinstance(event, StatementFinished) and event.result.outcome == "deadlock" and self.race is not None:
            cycle = deadlock_cycle(lock_graph(self.race), event.session, event.result)
            if cycle is None and event.session in self._live_cycle:
                cycle = self._live_cycle  # the others' waits ended before the victim's answer was in
            if cycle is not None:
                self.last_deadlock = (cycle, event.session)
            self._live_cycle = ()
        if isinstance(self.screen, LockView):
            self.screen.redraw()
        if isinstance(event, StatementStarted):
            if self._ticker is None or self._ticker.done():
                self._ticker = asyncio.create_task(self._run_ticker(), name="lockrace-redraw")
        self.timeline.update()

    async def _run_ticker(self) -> None:
        """Redraw wait counters and the timeline while anything runs.

        A plain asyncio loop rather than a Textual timer (a timer tick is a
        message through the app's queue); each item repaints only when what
        it shows has changed, and all of them in one frame.
        """
        while True:
            youngest = self.timeline_model.youngest_start()
            age = (time.perf_counter_ns() - youngest) / 1e9 if youngest is not None else float("inf")
            await asyncio.sleep(next((every for younger, every in REDRAW_BY_AGE if age < younger),
                                     REDRAW_BY_AGE[-1][1]))
            try:
                self._tick()
            except Exception:  # a widget gone while closing: stop redrawing
                return
            if not self.timeline_model.live:
                return

    def _tick(self) -> None:
        for panel in self._panel_list:
            panel.tick()
        self.timeline.tick()

    # ------------------------------------------------------------ scenario
    def _on_entry(self, entry: Entry) -> None:
        if entry.kind == EntryKind.NOTE:
            step = self.player.current if self.player is not None else None
            for line in entry.text.splitlines():
                if step is not None:
                    self._write(step.session, f"-- {line}", themed("italic $lr-note"))
        elif entry.kind == EntryKind.LAUNCH:
            # the hint says the step runs (it no longer offers F5 for it); drawn after the statement is on its way
            self.call_later(self._show_in_progress, entry.record, None)
        elif entry.kind == EntryKind.BLOCKED and entry.record is not None:
            self.call_later(self._show_in_progress, entry.record, entry)
        elif entry.kind in (EntryKind.FINISH, EntryKind.PROBLEM) and entry.record is not None:
            rec = entry.record
            if entry.kind == EntryKind.FINISH:
                lines = self._verdict(rec)
            else:
                lines = [(f"✗ step {rec.step.name}: {entry.text}", themed("bold $lr-failure"))]
            for line, style in lines:
                self._write(rec.step.session, line, style)
            self._show_bar()

    def _write(self, session: str, line: str, style: str) -> None:
        """A line of lockrace's own in ``session``'s transcript, shown or not."""
        panel = self.panels.get(session)
        if panel is not None:
            panel.write(line, style)
        elif session in self.logs:
            self.logs[session].write(line, style)

    def _verdict(self, rec) -> list[tuple[str, str]]:
        expectations = rec.step.applicable(self.flavor)
        if not rec.failures:
            if self.player is not None and self.player.is_spec:  # a spec states no expectations: just done
                return [(f"· step {rec.step.name} done", themed("$lr-spec-done"))]
            if not expectations:
                return [(f"✓ step {rec.step.name}", themed("$lr-no-expectation"))]
            what = "; ".join(e.describe() for e in expectations)
            return [(f"✓ step {rec.step.name} as expected: {what}", themed("bold $lr-success"))]
        return [(f"✗ {failure}", themed("bold $lr-failure")) for failure in rec.failures]

    def _show_next(self) -> None:
        player = self.player
        step = player.next_step if player is not None else None
        for log in self.logs.values():
            log.next_text = None
        for panel in self.panels.values():
            if player is not None and step is not None and panel.session == step.session:
                first = step.sql.splitlines()[0] if step.sql else ""
                more = " …" if "\n" in step.sql else ""
                note = f"\n   {step.note}" if step.note else ""
                panel.show_next(f"▶ next, F5: step {player.position + 1}/{player.total}  "
                                f"{step.session}> {first}{more}{note}")
            else:
                panel.show_next(None)
        self._show_bar()

    def _show_in_progress(self, rec, blocked: Entry | None) -> None:
        """The step being run, in its session's panel, instead of a stale "next, F5" hint: running, or
        waiting on whom (a step the runner waits for keeps F5 busy until it ends)."""
        player = self.player
        step: Step = rec.step
        if player is None or rec.result is not None or step is not player.current or not player.busy:
            return  # finished already, or the runner moved on (a step that completes later)
        first = step.sql.splitlines()[0] if step.sql else ""
        if blocked is None:
            text = f"⏳ step {rec.index}/{player.total} running: {step.session}> {first}"
        else:
            who = names_text(blocked.blockers)
            on = f" on {blocked.lock.describe()}" if blocked.lock else ""
            text = (f"⏳ step {rec.index}/{player.total} waiting: {step.session} is blocked by {who}{on}; "
                    f"F5 runs step {rec.index + 1} once it ends" if rec.index < player.total else
                    f"⏳ step {rec.index}/{player.total} waiting: {step.session} is blocked by {who}{on}")
        for log in self.logs.values():
            log.next_text = None
        for panel in self.panels.values():
            panel.show_next(text if panel.session == step.session else None)
        self._show_bar()

    def _show_sessions(self, names: list[str]) -> None:
        """Let the panels show these sessions (at most four), in this order; the rest keep running unseen."""
        focused = self.focused_session()
        self.shown = list(names)
        for i, panel in enumerate(self._panel_list):
            if i < len(names):
                panel.display = True
                panel.show(self.logs[names[i]])
            else:
                panel.display = False
        self._apply_size()
        if self.player is not None:
            self._show_next()
        else:
            self._show_bar()
        if self.screen is self.screen_stack[0] and focused not in self.shown and self.shown:
            self.action_focus_session(self.shown[0])

    async def _step_once(self) -> bool:
        player = self.player
        if player is None or player.busy:
            return False
        try:
            ran = await player.step()
        except Exception as exc:
            self.notify(f"step failed: {exc}", severity="error")
            return False
        self._show_next()
        if player.finished:
            met, bad = player.met()
            verdict = "every expectation met" if not bad else f"{bad} step(s) not as expected"
            if player.is_spec:
                verdict = (f"permutation {player.permutation + 1} of {player.permutations} stepped"
                           + (f"; {bad} step(s) did not finish" if bad else ""))
            self.notify(f"{player.scenario.name} finished: {verdict}. Keep typing freely.",
                        severity="information" if not bad else "warning")
        return ran

    @work(group="step")
    async def action_step(self) -> None:
        if self.player is None:
            self.notify("No scenario loaded: F9 picks one.", severity="warning")
            return
        if self.player.busy:
            current = self.player.current
            name = current.session if current is not None else "its session"
            self.notify(f"Step {self.player.position}/{self.player.total} is still running in {name}: "
                        "F5 runs the next one once it ends (F2 cancels it).", severity="warning")
            return
        await self._step_once()

    @work(group="step")
    async def action_run_to_end(self) -> None:
        if self.player is None:
            self.notify("No scenario loaded: F9 picks one.", severity="warning")
            return
        while self.player is not None and self.player.next_step is not None:
            if not await self._step_once():
                await asyncio.sleep(0.05)
                if self.player is not None and not self.player.busy and self.player.next_step is None:
                    break

    def action_autoplay(self) -> None:
        if self.player is None:
            self.notify("No scenario loaded: F9 picks one.", severity="warning")
            return
        if self.autoplaying:
            self._stop_play()
        else:
            self.autoplaying = True
            self._autoplay()
        self._show_bar()

    @work(group="autoplay", exclusive=True)
    async def _autoplay(self) -> None:
        try:
            while self.autoplaying and self.player is not None and self.player.next_step is not None:
                await self._step_once()
                await asyncio.sleep(self.autoplay_delay)
        finally:
            self.autoplaying = False
            self._show_bar()

    def _stop_play(self) -> None:
        self.autoplaying = False
        self.workers.cancel_group(self, "autoplay")
        self.workers.cancel_group(self, "step")

    def action_pick_scenario(self) -> None:
        if isinstance(self.screen, ScenarioPicker):
            return
        try:
            scenarios = self.scenarios()
        except Exception as exc:
            self.notify(f"cannot read the built-in scenarios: {exc}", severity="error")
            return
        self.push_screen(ScenarioPicker(scenarios, self.engine), self.load_scenario)

    def action_open_file(self) -> None:
        """The scenario picker with its file-path line focused: open a .race or isolation .spec file."""
        if isinstance(self.screen, ScenarioPicker):
            self.screen.focus_path()
            return
        try:
            scenarios = self.scenarios()
        except Exception:
            scenarios = []
        self.push_screen(ScenarioPicker(scenarios, self.engine, path_first=True), self.load_scenario)

    def scenarios(self) -> list[Scenario]:
        if self._scenarios is None:
            self._scenarios = builtins()
        return self._scenarios

    def load_scenario(self, scenario: Scenario | None) -> None:
        """Load a scenario; an isolation spec with several permutations first asks which one to step."""
        if scenario is None:
            return
        engine = self.engine if scenario.runs_on(self.engine) else scenario.engines[0]
        if engine != self.engine:
            self.notify(f"{scenario.name} runs on {', '.join(scenario.engines)}: switching engine.")
        if scenario.kind == ScenarioKind.ISOLATION_SPEC and len(scenario.order()) > 1:
            def chosen(index: int | None) -> None:
                self.open_race(engine, scenario, index or 0)

            self.push_screen(PermutationPicker(scenario, 0), chosen)
            return
        self.open_race(engine, scenario)

    def action_pick_permutation(self) -> None:
        """Choose which permutation of the loaded isolation spec to step (restarts it from its setup)."""
        player = self.player
        if player is None or player.permutations < 2:
            self.notify("The loaded scenario has a single order of steps." if player is not None
                        else "No scenario loaded: F9 picks one, Ctrl+O opens a file.", severity="warning")
            return
        if isinstance(self.screen, PermutationPicker):
            return
        scenario, engine = player.scenario, self.engine

        def chosen(index: int | None) -> None:
            if index is not None:
                self.open_race(engine, scenario, index)

        self.push_screen(PermutationPicker(scenario, player.permutation), chosen)

    def action_show_sessions(self) -> None:
        """Choose which sessions (at most four) the panels show."""
        if isinstance(self.screen, SessionChooser):
            return
        if len(self.logs) <= 1:
            self.notify("There is only one session.")
            return

        def chosen(names: list[str] | None) -> None:
            if names:
                self._show_sessions(names)

        self.push_screen(SessionChooser(list(self.logs), self.shown, len(self._panel_list)), chosen)

    # ------------------------------------------------------------ sessions
    def focused_session(self) -> str:
        node: DOMNode | None = self.focused
        while node is not None:
            if isinstance(node, SessionPanel):
                return node.session
            node = node.parent
        return self._last_session

    def on_descendant_focus(self, event) -> None:
        node = event.widget
        while node is not None:
            if isinstance(node, SessionPanel):
                self._last_session = node.session
                return
            node = node.parent

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Alt+A..D are priority bindings (handled before the key reaches the focused
        # input, so that the keys after them go to the new panel); over a dialog they
        # are not ours: the key goes to the dialog as before
        if action == "focus_session" and len(self.screen_stack) > 1:
            return False
        return True

    def action_focus_session(self, name: str) -> None:
        """Focus session ``name``'s panel; Alt+A..D name the four slots when sessions have other names."""
        panel = self.panels.get(name)
        if panel is None and name in SESSION_NAMES:
            index = SESSION_NAMES.index(name)
            shown = self._panel_list[: len(self.shown)]
            panel = shown[index] if index < len(shown) else None
        if panel is not None:
            if self.zoomed is not None and self.zoomed != panel.session:  # the zoom moves to it
                self.zoomed = panel.session
                self._apply_size()
                self.call_after_refresh(panel.input.focus)
                return
            # at once, not on a later turn as Widget.focus does: keys that came in the same
            # burst (a fast typist, a paste, tmux send-keys) are already queued behind this one
            panel.input.screen.set_focus(panel.input)

    def action_editor(self) -> None:
        """A multi-line editor whose text runs in the focused session."""
        from .sql_editor import SqlEditor

        if isinstance(self.screen, SqlEditor):
            return
        panel = self.panels[self.focused_session()]
        draft = panel.input.value

        def done(sql: str | None) -> None:
            panel.input.focus()
            if sql:
                panel.input.value = ""
                panel.input.remember(sql)
                self.on_session_panel_submitted(SessionPanel.Submitted(panel, sql))

        self.push_screen(SqlEditor(panel.session, draft), done)

    def _owned(self, engine: str) -> bool:
        """Is the server of ``engine`` one lockrace started (not given by DSN)?"""
        target = self.pool.targets.get(engine)
        return target is not None and target.owned

    def on_session_panel_submitted(self, message: SessionPanel.Submitted) -> None:
        race = self.race
        name = message.panel.session
        if race is None or not self.ready.is_set():
            self.notify("Not connected yet: wait for the server.", severity="warning")
            message.panel.input.value = message.sql
            return
        wide = None if self._owned(self.engine) else server_wide(message.sql, dialect_of(self.engine))
        if wide:
            self.notify(refuse_server_wide("This statement", wide), severity="error")
            message.panel.input.value = message.sql
            return
        try:
            race.submit(name, message.sql)
            if self.history is not None and self.history.add(message.sql):
                asyncio.get_running_loop().run_in_executor(None, self.history.save, message.sql)
        except SessionBusy:
            self.notify(f"Session {name} is still running a statement: F2 cancels it, or wait.", severity="warning")
            message.panel.input.value = message.sql
        except KeyError:
            self.notify(f"Session {name} is not connected.", severity="error")

    @work(group="session")
    async def action_cancel(self) -> None:
        name = self.focused_session()
        race = self.race
        if race is None or name not in race.sessions or not race.sessions[name].busy:
            self.notify(f"Session {name} is not running anything.")
            return
        try:
            ok = await race.cancel(name)
        except Exception as exc:  # the monitor connection is gone, say so rather than crash
            self.notify(f"Could not cancel {name}'s statement: {exc}", severity="error")
            return
        self.notify(f"Asked the server to cancel {name}'s statement." if ok
                    else f"The server did not accept the cancel for {name}.", severity="information" if ok else "warning")

    def action_help_quit(self) -> None:
        """Ctrl+C (with no text selected in the input, where it copies): as in psql,
        cancel the focused session's running statement; with nothing running there,
        Textual's hint that Ctrl+Q quits."""
        race = self.race
        name = self.focused_session()
        if race is not None and name in race.sessions and race.sessions[name].busy:
            self.action_cancel()
            return
        super().action_help_quit()

    @work(group="session")
    async def action_rollback(self) -> None:
        name = self.focused_session()
        race = self.race
        if race is None or name not in race.sessions:
            return
        try:
            result = await race.rollback(name)
        except Exception as exc:
            self.notify(f"Could not roll back {name}: {exc}", severity="error")
            return
        if result is None:
            self.notify(f"Session {name} could not be rolled back: its statement did not stop.", severity="error")

    def action_free_form(self) -> None:
        """Back to the free-form sandbox: the scenario is unloaded, fresh sessions and sandbox tables."""
        was = self.player.scenario.name if self.player is not None else None
        self.notify((f"{was} unloaded: " if was else "") + "free-form race, fresh sessions and sandbox tables "
                    "(accounts, jobs).")
        self.open_race(self.engine, None)

    def action_reset(self) -> None:
        scenario = self.player.scenario if self.player is not None else None
        self.notify("Resetting: fresh sessions and sandbox" + (f", {scenario.name} from step 1." if scenario else "."))
        self.open_race(self.engine, scenario, self.permutation if scenario is not None else 0)

    def action_switch_engine(self) -> None:
        other = "mysql" if self.engine == "postgres" else "postgres"
        scenario = self.player.scenario if self.player is not None else None
        if scenario is not None and not scenario.runs_on(other):
            scenario = None
        self.open_race(other, scenario, self.permutation if scenario is not None else 0)

    def action_lab(self) -> None:
        """The race lab (holder vs waiter, every mode) on the current server."""
        from .lab_screen import LabScreen

        if self.race is None:
            self.notify("Not connected yet: wait for the server.", severity="warning")
            return
        if not isinstance(self.screen, LabScreen):
            self.push_screen(LabScreen(self.race.backend))

    def action_copy_result(self) -> None:
        """Ctrl+Y: the focused panel's last statement and its result, to the clipboard
        (the terminal's, by OSC 52: over ssh too, where the terminal allows it)."""
        self._copy(last_only=True)

    def action_copy_log(self) -> None:
        """Alt+Y: the focused panel's whole transcript, to the clipboard."""
        self._copy(last_only=False)

    def _copy(self, last_only: bool) -> None:
        name = self.focused_session()
        log = self.logs.get(name)
        if log is None or not log.entries:
            self.notify(f"Session {name}'s panel has nothing to copy yet.")
            return
        lines = log.lines
        if last_only:
            starts = [i for i, line in enumerate(lines) if line.startswith(f"{name}> ")]
            if not starts:
                self.notify(f"Session {name} has run nothing yet.")
                return
            lines = lines[starts[-1]:]
        self.copy_to_clipboard("\n".join(lines) + "\n")
        what = "its last statement and result" if last_only else "its whole transcript"
        self.notify(f"Copied session {name}'s {what} ({len(lines)} line{'s' if len(lines) != 1 else ''}).")

    def action_lock_view(self) -> None:
        """F12: who holds and who waits, drawn live (F12 or Esc again goes back)."""
        if isinstance(self.screen, LockView):
            self.pop_screen()
            return
        if len(self.screen_stack) > 1:  # over a dialog: not from there
            return
        self.push_screen(LockView())

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_save(self) -> None:
        """Ask where to save (a name in the current directory to start with), then save."""
        from .save_dialog import SaveDialog

        if isinstance(self.screen, SaveDialog):
            return
        running = self.recorder.unfinished
        note = (f"{', '.join(p.session for p in running)} still running: "
                "a statement that has not finished is not saved." if running else "")
        default = self.save_dir / f"{time.strftime(f'lockrace-{self.engine}-%Y%m%d-%H%M%S')}.race"

        def chosen(path: Path | None) -> None:
            if path is None:
                return
            try:
                race_path, text_path = self.save_to(path)
            except OSError as exc:
                self.notify(f"could not save: {exc}", severity="error")
                return
            self.notify(f"Saved the race as {race_path.name} and the transcript as {text_path.name} in {race_path.parent}")

        self.push_screen(SaveDialog(default, self.save_dir, note), chosen)

    def save_files(self, stem: str) -> tuple[Path, Path]:
        return self.save_to(self.save_dir / f"{stem}.race")

    def save_to(self, race_path: Path) -> tuple[Path, Path]:
        """The race as ``race_path`` and, beside it, the transcript ``lockrace run race_path`` prints."""
        text_path = race_path.with_suffix(".txt")
        stem = race_path.stem
        server = self.race.backend.server_name if self.race is not None else self.server_label
        race_path.write_text(self.recorder.race_text(stem), encoding="utf-8")
        text_path.write_text(self.recorder.transcript_text(stem, server, self.pool.origin(self.engine)),
                             encoding="utf-8")
        return race_path, text_path

    # ------------------------------------------------------------ palette
    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield SystemCommand("Help", "Every key and what each session state means (F1)", self.action_help)
        yield SystemCommand("Cancel statement", "Cancel the focused session's running statement (F2)",
                            self.action_cancel)
        yield SystemCommand("Roll back", "Roll back the focused session's transaction (F3)", self.action_rollback)
        yield SystemCommand("Reset sandbox", "Fresh sessions and tables; restarts a loaded scenario (F4)",
                            self.action_reset)
        yield SystemCommand("Step", "Run the next scenario step (F5)", self.action_step)
        yield SystemCommand("Run to end", "Run the rest of the scenario (F6)", self.action_run_to_end)
        yield SystemCommand("Auto-play", "Step the scenario automatically (F7)", self.action_autoplay)
        other = "MariaDB/MySQL" if self.engine == "postgres" else "PostgreSQL"
        yield SystemCommand(f"Switch engine to {other}", "Tear down this race and open one on the other engine (F8)",
                            self.action_switch_engine)
        yield SystemCommand("Scenarios", "Pick a built-in scenario (F9)", self.action_pick_scenario)
        yield SystemCommand("Free-form sandbox", "Unload the scenario: fresh sessions and sandbox tables accounts, jobs "
                            "(Ctrl+F)", self.action_free_form)
        yield SystemCommand("Open scenario file…", "Load a .race scenario or a PostgreSQL isolation .spec file (Ctrl+O)",
                            self.action_open_file)
        if self.player is not None and self.player.permutations > 1:
            yield SystemCommand("Choose permutation…", "Step another order of the loaded spec's steps (Ctrl+T)",
                                self.action_pick_permutation)
        if len(self.logs) > 1:
            yield SystemCommand("Show sessions…", "Choose which sessions the four panels show (Ctrl+G)",
                                self.action_show_sessions)
        yield SystemCommand("Multi-line SQL", "Edit a multi-line statement for the focused session (Ctrl+N)",
                            self.action_editor)
        yield SystemCommand("Copy result", "The focused panel's last statement and its result, to the clipboard "
                            "(Ctrl+Y)", self.action_copy_result)
        yield SystemCommand("Copy transcript", "The focused panel's whole transcript, to the clipboard (Alt+Y)",
                            self.action_copy_log)
        yield SystemCommand("Locks", "Who holds and who waits, with the wait-for graph drawn, live (F12)",
                            self.action_lock_view)
        yield SystemCommand("Race lab", "Holder vs waiter in every wait mode on this server, measured (Ctrl+L)",
                            self.action_lab)
        yield SystemCommand("Save race", "Save the race so far as a .race scenario and a .txt transcript (Ctrl+S)",
                            self.action_save)
        try:
            scenarios = self.scenarios()
        except Exception:
            scenarios = []
        for sc in scenarios:
            yield SystemCommand(f"Scenario: {sc.name}", f"{sc.title} [{', '.join(sc.engines)}]",
                                lambda sc=sc: self.load_scenario(sc))
        yield from super().get_system_commands(screen)

    # ------------------------------------------------------------ quitting
    async def on_unmount(self) -> None:
        """However the app ends, statements are cancelled and connections closed.
        Ended by a signal, the servers are left as found within moments too (the
        sandbox dropped on a server given by DSN), as ``lockrace run`` does; Ctrl+Q
        has done that already (_close_everything)."""
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._close_race(), 10)
        if exitguard.app_guard is not None and exitguard.app_guard.fired and not self.pool_closed:
            self.pool_closed = True
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.pool.close(quick=True), 1)

    async def action_quit(self) -> None:
        if self.closing:
            return
        self.closing = True
        self._banner("closing: cancelling statements, rolling back, closing connections, stopping servers…",
                     themed("bold $lr-warning"))
        self._close_everything()

    @work(group="shutdown")
    async def _close_everything(self) -> None:
        self._stop_play()
        self.workers.cancel_group(self, "race")
        try:
            await asyncio.wait_for(self._close_race(), 10)
        except Exception:
            pass
        self.pool_closed = True
        try:
            await asyncio.wait_for(self.pool.close(), 20)
        except Exception:
            pass
        self.exit(0)
