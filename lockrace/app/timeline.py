"""The wait-budget timeline: one lane per session on a shared time axis.

``TimelineModel`` is plain data fed with engine events; ``Timeline`` draws
it.  While a statement runs the app redraws the widget on a timer (never by
asking the database), so a waiting bar grows smoothly toward its budget
marker.
"""

from __future__ import annotations

from dataclasses import dataclass
from time import perf_counter_ns

from rich.text import Text
from textual.widget import Widget

from ..engine.events import (
    Budget,
    Event,
    LockInfo,
    StatementBlocked,
    StatementFinished,
    StatementStarted,
)
from ..render.transcript import OUTCOME_WORDS
from .status import seconds

HORIZON_NS = 60_000_000_000  # finished bars older than this (before the latest activity) scroll away
MIN_SPAN_NS = 1_000_000_000

BAR_STYLES = {
    "running": "#87d7ff",
    "blocked": "#ffd75f",
    "ok": "#5fd75f",
    "timed_out": "#ff5f5f",
    "statement_timeout": "#ff5f5f",
    "refused": "#d75fd7",
    "skipped": "#00d7af",
    "deadlock": "#d70000",
    "cancelled": "#b2b2b2",
    "error": "#ff8787",
    "connection_lost": "#af0000",
    "certification_conflict": "#ff8700",
    "recovery_conflict": "#af87ff",
}


@dataclass
class Bar:
    session: str
    stmt_id: int
    sql: str
    start_ns: int
    budget: Budget | None
    end_ns: int | None = None
    blocked_since: int | None = None
    blocked_until: int | None = None
    blockers: tuple[str, ...] = ()
    lock: LockInfo | None = None
    outcome: str | None = None
    skipped: int = 0
    skipped_from: tuple[str, ...] = ()

    @property
    def running(self) -> bool:
        return self.end_ns is None

    @property
    def was_blocked(self) -> bool:
        return self.blocked_since is not None

    def state(self) -> str:
        if self.outcome is not None:
            return self.outcome
        if self.blocked_since is not None and self.blocked_until is None:
            return "blocked"
        return "running"


class TimelineModel:
    def __init__(self, lanes: list[str]):
        self.lanes = list(lanes)
        self.nodes: dict[str, str] = {}  # cluster races: lane -> node, shown beside the lane name
        self.bars: list[Bar] = []
        self._open: dict[int, Bar] = {}

    def clear(self, lanes: list[str] | None = None) -> None:
        if lanes is not None:
            self.lanes = list(lanes)
        self.bars.clear()
        self._open.clear()

    @property
    def live(self) -> bool:
        return bool(self._open)

    def youngest_start(self) -> int | None:
        """perf_counter_ns start of the most recently started statement still running."""
        return max((bar.start_ns for bar in self._open.values()), default=None)

    def apply(self, event: Event) -> None:
        if isinstance(event, StatementStarted):
            if event.session not in self.lanes:
                self.lanes.append(event.session)
            bar = Bar(event.session, event.stmt_id, event.sql, event.t_ns, event.budget)
            self.bars.append(bar)
            self._open[event.stmt_id] = bar
        elif isinstance(event, StatementBlocked):
            bar = self._open.get(event.stmt_id)
            if bar is not None:
                if bar.blocked_since is None or bar.blocked_until is not None:
                    bar.blocked_since = bar.blocked_since or event.t_ns
                    bar.blocked_until = None
                bar.blockers = event.blockers
                bar.lock = event.lock
        elif isinstance(event, StatementFinished):
            bar = self._open.pop(event.stmt_id, None)
            if bar is not None:
                res = event.result
                bar.end_ns = event.t_ns
                if res.started_ns:
                    # the driver call's own times, not when the loop got round to the answer
                    bar.start_ns = res.started_ns
                    bar.end_ns = res.started_ns + res.elapsed_ns
                if bar.blocked_since is not None and bar.blocked_until is None:
                    bar.blocked_until = bar.end_ns
                if res.waited_ns and res.started_ns:
                    bar.blocked_since = max(bar.start_ns, bar.end_ns - res.waited_ns)
                    bar.blocked_until = bar.end_ns
                bar.outcome = res.outcome
                bar.skipped = res.skipped_rows
                bar.skipped_from = res.skipped_from
                if res.blocked_by:
                    bar.blockers = res.blocked_by
        # StatementUnblocked: the bar keeps its blocked stretch until it finishes

    def window(self, now: int) -> tuple[int, int, list[Bar]]:
        """(t0, t1, visible bars): auto-scaled to what is worth seeing."""
        if not self.bars:
            return now - MIN_SPAN_NS, now, []
        latest = max((b.end_ns or now) for b in self.bars)
        visible = [b for b in self.bars if b.running or (b.end_ns or now) >= latest - HORIZON_NS]
        t0 = min(b.start_ns for b in visible)
        t1 = now if self.live else latest
        for b in visible:
            if b.budget is not None and b.budget.ms > 0 and (b.running or b.was_blocked):
                t1 = max(t1, b.start_ns + int(b.budget.ms * 1e6))
        t1 = max(t1, t0 + MIN_SPAN_NS)
        if self.live:
            # a steady axis: the span snaps up to 1-2-5 steps, so a live redraw moves only bar ends
            t1 = t0 + _snap_span(t1 - t0)
        return t0, t1, visible


def _snap_span(span_ns: int) -> int:
    unit = 1_000_000  # 1 ms
    while True:
        for m in (1, 1.5, 2, 3, 4, 5, 6, 8):
            if m * unit >= span_ns:
                return int(m * unit)
        unit *= 10


def _nice_step(span_ns: int, cells: int) -> int:
    """A tick step (ns) giving roughly one tick per 12 cells."""
    want = span_ns / max(1, cells // 12)
    for step_ms in (1, 2, 5, 10, 20, 50, 100, 200, 250, 500, 1000, 2000, 5000, 10000, 15000, 30000, 60000,
                    120000, 300000, 600000):
        if step_ms * 1e6 >= want:
            return int(step_ms * 1e6)
    return int(1_200_000 * 1e6)


def _tick_label(ns: int) -> str:
    if ns == 0:
        return "0"
    if ns < 1e9:
        return f"{ns / 1e6:g} ms"
    return f"{ns / 1e9:g} s"


def lane_label(bar: Bar | None, now: int) -> tuple[str, str]:
    """Right-hand text for a lane and its style."""
    if bar is None:
        return "", "dim"
    state = bar.state()
    if state == "blocked":
        who = ", ".join(bar.blockers) or "another transaction"
        on = f" · {bar.lock.describe()}" if bar.lock else ""
        return f"waits on {who}{on}", "bold #ffd75f"
    if state == "running":
        return f"running {seconds(now - bar.start_ns)}", "#87d7ff"
    took = seconds(bar.end_ns - bar.start_ns)
    word = OUTCOME_WORDS.get(state, state)
    if state == "skipped":
        whose = f" of {', '.join(bar.skipped_from)}" if bar.skipped_from else ""
        word = f"skipped {bar.skipped} row{'s' if bar.skipped != 1 else ''}{whose}"
    text = f"{word} in {took}"
    if bar.was_blocked:
        who = ", ".join(bar.blockers) or "another transaction"
        text += f" · waited on {who}"
    return text, BAR_STYLES.get(state, "white")


def render_timeline(model: TimelineModel, width: int, now: int) -> Text:
    name_w = max([3] + [len(lane) + len(model.nodes.get(lane, "")) + 3 for lane in model.lanes if model.nodes.get(lane)])
    label_w = max(18, min(46, width // 3))
    area = max(10, width - name_w - label_w - 2)
    t0, t1, visible = model.window(now)
    span = max(1, t1 - t0)

    def col(t: int) -> int:
        return min(area - 1, max(0, int((t - t0) * area / span)))

    out = Text(no_wrap=True, overflow="crop")
    for lane in model.lanes:
        cells: list[tuple[str, str]] = [("─", "#3a3a3a")] * area
        markers: list[tuple[int, str]] = []
        last: Bar | None = None
        for bar in visible:
            if bar.session != lane:
                continue
            last = bar
            end = bar.end_ns if bar.end_ns is not None else now
            state = bar.state()
            color = BAR_STYLES.get(state, "white")
            x0, x1 = col(bar.start_ns), col(end)
            bx = col(bar.blocked_since) if bar.blocked_since is not None else None
            for x in range(x0, max(x0, x1) + 1):
                blocked_part = bx is not None and x >= bx and (bar.blocked_until is None or x <= col(bar.blocked_until))
                cells[x] = ("█" if blocked_part else "▬", color)
            if bar.budget is not None and (bar.running or bar.was_blocked or state in ("refused", "timed_out")):
                mx = col(bar.start_ns + int(bar.budget.ms * 1e6))
                markers.append((mx, "bold #ffffff on #870000" if bar.running else "bold #ffffff"))
        for mx, style in markers:
            cells[mx] = ("┃", style)
        node = model.nodes.get(lane)
        out.append(f" {lane}@{node} ".ljust(name_w) if node else f" {lane} ".ljust(name_w), style="bold")
        run_text, run_style = "", None
        for ch, style in cells:  # one span per run of equal style keeps the redraw cheap
            if style != run_style and run_text:
                out.append(run_text, style=run_style)
                run_text = ""
            run_text += ch
            run_style = style
        if run_text:
            out.append(run_text, style=run_style)
        label, lstyle = lane_label(last, now)
        out.append("  ")
        out.append(label[:label_w].ljust(label_w), style=lstyle)
        out.append("\n")
    # axis
    step = _nice_step(span, area)
    axis = [" "] * area
    labels: list[tuple[int, str]] = []
    t = 0
    while t0 + t <= t1:
        x = col(t0 + t)
        axis[x] = "┴"
        labels.append((x, _tick_label(t)))
        t += step
    out.append(" " * name_w)
    out.append("".join(axis).replace(" ", "─"), style="#6c6c6c")
    out.append("\n")
    line = [" "] * (area + label_w + 2)
    for x, text in labels:
        if x + len(text) <= len(line) and all(c == " " for c in line[max(0, x - 1): x + len(text) + 1]):
            line[x: x + len(text)] = list(text)
    out.append(" " * name_w)
    out.append("".join(line).rstrip(), style="#9e9e9e")
    return out


class Timeline(Widget):
    """Draws a TimelineModel; ``refresh()`` it from a timer while anything runs."""

    DEFAULT_CSS = """
    Timeline { height: auto; }
    """

    def __init__(self, model: TimelineModel, **kwargs):
        super().__init__(**kwargs)
        self.model = model
        self.clock = perf_counter_ns
        self._drawn: Text | None = None
        self._key: tuple = ()

    def get_content_height(self, container, viewport, width: int) -> int:
        return len(self.model.lanes) + 2

    def _draw(self) -> Text:
        return render_timeline(self.model, self.content_size.width or 80, self.clock())

    def update(self) -> None:
        """Redraw after an event: always."""
        self._drawn = None
        self.refresh()

    def tick(self) -> None:
        """Redraw from the timer: only if some cell changed (a repaint costs far more than a draw)."""
        text = self._draw()
        key = (text.plain, tuple((sp.start, sp.end, str(sp.style)) for sp in text.spans))
        if key != self._key:
            self._drawn, self._key = text, key
            self.refresh()

    def render(self) -> Text:
        if self._drawn is None or self._drawn.cell_len == 0:
            self._drawn = self._draw()
            self._key = (self._drawn.plain, tuple((sp.start, sp.end, str(sp.style)) for sp in self._drawn.spans))
        return self._drawn
