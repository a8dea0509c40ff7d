"""The race lab in the app: runs holder vs waiter on the current server and
shows the holder-vs-waiter table, filling in as runs finish, plus a strip of every
individual wait per mode on a log time axis."""

from __future__ import annotations

import asyncio

from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, ProgressBar, Static

from ..backends.base import Backend
from ..lab.holder_waiter import HolderWaiterLab, LabResult, ModeResult, Sample
from ..lab.modes import LabConfig, LabError, Mode, make_config
from ..lab.strip import axis_for, counts, density, tick_line
from ..lab.table import lab_notes, lab_table
from .palette import themed

LABEL_WIDTH = 30
OK_STYLE, ERROR_STYLE, MARK_STYLE = "bold $lr-success", "bold $lr-failure", "bold $lr-accent"


def strip_lines(result: LabResult, width: int) -> Group:
    """One line per mode: where each run's wait fell, ok runs green, errors red;
    ┃ marks the budget (bounded modes) or the hold (default)."""
    cfg = result.config
    axis = axis_for(cfg.hold_ms, max(10, width - LABEL_WIDTH - 2))
    lines = [Text("Individual waits (one mark per run, log axis; ┃ = budget or hold)", style="bold")]
    for mr in result.modes.values():
        ok = counts([s.wait_ms for s in mr.samples if not s.error], axis)
        bad = counts([s.wait_ms for s in mr.samples if s.error], axis)
        mark = None
        if mr.mode.bounded:
            mark = mr.applied_budget_ms if mr.applied_budget_ms is not None else mr.mode.budget_ms
        elif mr.mode.key == "default":
            mark = cfg.hold_ms
        mark_cell = axis.cell(mark) if mark else None
        line = Text(f"{mr.mode.label[:LABEL_WIDTH - 1]:<{LABEL_WIDTH}}")
        for i in range(axis.width):
            n_ok, n_bad = ok[i], bad[i]
            if n_ok + n_bad:
                line.append(density(n_ok + n_bad), style=themed(ERROR_STYLE if n_bad >= n_ok else OK_STYLE))
            elif i == mark_cell:
                line.append("┃", style=themed(MARK_STYLE))
            else:
                line.append("─", style="dim")
        lines.append(line)
    lines.append(Text(f"{'(log axis)':<{LABEL_WIDTH}}" + tick_line(axis), style="dim"))
    return Group(*lines)


class LabScreen(Screen[None]):
    """``LabScreen(backend)``: push it; Esc goes back, r runs the lab again."""

    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("r", "rerun", "Run again"),
    ]
    DEFAULT_CSS = """
    LabScreen { layout: vertical; }
    LabScreen #lab-head { height: auto; padding: 0 1; }
    LabScreen ProgressBar { padding: 0 1; height: 1; }
    LabScreen #lab-body { height: 1fr; padding: 0 1; }
    """

    def __init__(self, backend: Backend, runs: int = 30, hold_ms: int | None = None, budget_ms: int | None = None,
                 modes: str | None = None, warmup: int = 3):
        super().__init__()
        self.backend = backend
        self.args = (runs, hold_ms, budget_ms, modes, warmup)
        self.config: LabConfig | None = None
        self.result: LabResult | None = None  # the finished run, if any
        self.live: LabResult | None = None  # what has been measured so far
        self.error = ""
        self.done = asyncio.Event()
        self._left = False

    def compose(self) -> ComposeResult:
        yield Static(id="lab-head")
        yield ProgressBar(id="lab-progress", show_eta=False)
        with VerticalScroll(id="lab-body"):
            yield Static(id="lab-table")
            yield Static(id="lab-strips")
            yield Static(id="lab-notes")
        yield Footer()

    def on_mount(self) -> None:
        self.action_rerun()

    # ------------------------------------------------------------ running
    def action_rerun(self) -> None:
        if self.workers and any(w.is_running for w in self.workers):
            return
        self.run_worker(self._run(), exclusive=True, group="lab")

    def action_back(self) -> None:
        self._left = True
        self.workers.cancel_all()
        self.app.pop_screen()

    async def _run(self) -> None:
        self.done.clear()
        self.result, self.error = None, ""
        runs, hold, budget, modes, warmup = self.args
        head = self.query_one("#lab-head", Static)
        try:
            self.config = cfg = make_config(self.backend.family, self.backend.flavor, runs, hold, budget, modes, warmup)
        except LabError as exc:
            self.error = str(exc)
            head.update(Text(f"Race lab: {exc}", style="bold red"))
            self.done.set()
            return
        head.update(Text.assemble(
            ("Race lab", "bold"), f": holder vs waiter on {self.backend.server_name}: the holder keeps row 1 for "
            f"{cfg.hold_ms} ms, the waiter asks in each mode; {cfg.runs} runs per mode after {cfg.warmup} warm-up. ",
            ("Esc", "bold"), " back, ", ("r", "bold"), " run again",
        ))
        self.live = LabResult(cfg, self.backend.family, self.backend.flavor, self.backend.server_name,
                              self.backend.version)
        lab = HolderWaiterLab(self.backend, cfg, self._on_run)
        self.query_one(ProgressBar).update(total=lab.total_runs, progress=0)
        self._draw()
        try:
            self.result = await lab.run()
            self.live = self.result
        except LabError as exc:
            self.error = str(exc)
        except Exception as exc:  # a lost server: say so on the screen
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            if not self._left:  # Esc pops the screen and cancels this run: nothing left to draw on
                self._draw()
            self.done.set()

    def _on_run(self, mode: Mode, sample: Sample | None, done: int, total: int) -> None:
        if self._left:
            return
        self.query_one(ProgressBar).update(total=total, progress=done)
        if sample is None or self.live is None:
            return
        mr = self.live.modes.setdefault(mode.key, ModeResult(mode))
        mr.samples.append(sample)
        if mode.key == "timeout" and sample.budget is not None:
            mr.applied_budget_ms = sample.budget.ms
        self._draw()

    # ------------------------------------------------------------ drawing
    def _draw(self) -> None:
        body = self.query_one("#lab-body")
        width = max(40, (body.size.width or self.app.size.width) - 2)
        if self.live is not None and self.live.modes:
            self.query_one("#lab-table", Static).update(lab_table(self.live))
            self.query_one("#lab-strips", Static).update(strip_lines(self.live, width))
        notes = lab_notes(self.live) if self.result is not None and self.live is not None else []
        if self.error:
            notes.append(f"stopped: {self.error}")
        elif self.result is None:
            notes.append("running ...")
        self.query_one("#lab-notes", Static).update(Text("\n".join(notes)))
