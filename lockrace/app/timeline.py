"""The wait-budget timeline: one lane per session on a shared time axis.

``TimelineModel`` is plain data fed with engine events; ``Timeline`` draws
it.  While a statement runs the app redraws the widget on a timer (never by
asking the database), so a waiting bar grows smoothly toward its budget
marker.
"""

from __future__ import annotations

from dataclasses import dataclass
from time import perf_counter_ns

from rich.cells import cell_len
from rich.text import Text
from textual.binding import Binding
from textual.widget import Widget

from ..core.events import (
    Budget,
    Event,
    LockInfo,
    StatementBlocked,
    StatementFinished,
    StatementStarted,
)
from ..render.transcript import OUTCOME_WORDS, budget_amount, duration_words, names_text
from .status import lock_words, seconds
from .palette import StyleTable, themed

MIN_SPAN_NS = 250_000_000  # the narrowest window the timeline follows with
RECENT_NS = 2_000_000_000  # once nothing runs: the statements that ended this close to the last one
MAX_BARS = 5000  # history kept for scrolling back; older finished bars are dropped
MIN_MANUAL_SPAN_NS = 10_000_000  # zooming in stops at a 10 ms window


@dataclass
class View:
    """Which stretch of time the timeline shows: following the action, or a window
    the user scrolled/zoomed to (``end_ns`` and ``span_ns``)."""

    follow: bool = True
    end_ns: int = 0
    span_ns: int = 0

BAR_STYLES = StyleTable({
    "running": "$lr-running",
    "blocked": "$lr-blocked",
    "ok": "$lr-ok",
    "timed_out": "$lr-timed-out",
    "statement_timeout": "$lr-timed-out",
    "refused": "$lr-refused",
    "skipped": "$lr-skipped",
    "deadlock": "$lr-deadlock-lane",
    "cancelled": "$lr-cancelled",
    "error": "$lr-error",
    "connection_lost": "$lr-lost-lane",
    "certification_conflict": "$lr-conflict",
    "recovery_conflict": "$lr-recovery",
})


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
            started = Bar(event.session, event.stmt_id, event.sql, event.t_ns, event.budget)
            self.bars.append(started)
            self._open[event.stmt_id] = started
            if len(self.bars) > MAX_BARS:
                self.bars = [b for b in self.bars[-MAX_BARS:]] + [b for b in self.bars[:-MAX_BARS] if b.running]
        elif isinstance(event, StatementBlocked):
            bar = self._open.get(event.stmt_id)
            if bar is not None:
                if bar.blocked_since is None or bar.blocked_until is not None:
                    bar.blocked_since = bar.blocked_since or event.t_ns
                    bar.blocked_until = None
                bar.blockers = event.blockers
                bar.lock = event.lock
                if event.budget is not None:
                    bar.budget = event.budget
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

    def last_bar(self, lane: str) -> Bar | None:
        for bar in reversed(self.bars):
            if bar.session == lane:
                return bar
        return None

    def extent(self, now: int) -> tuple[int, int]:
        """From the first statement to now (anything running) or the last end."""
        if not self.bars:
            return now - MIN_SPAN_NS, now
        first = min(b.start_ns for b in self.bars)
        last = now if self.live else max(b.end_ns or now for b in self.bars)
        return first, max(last, first + MIN_SPAN_NS)

    def follow_window(self, now: int) -> tuple[int, int]:
        """The window on the action: the statements running now (or, once nothing runs, the
        last ones to finish) and their budget markers, so a 100 ms budget stays readable
        however long the app has been open."""
        if not self.bars:
            return now - MIN_SPAN_NS, now
        if self.live:
            focus = list(self._open.values())
            t1 = now
        else:
            t1 = max(b.end_ns or now for b in self.bars)
            focus = [b for b in self.bars if (b.end_ns or now) >= t1 - RECENT_NS]
            waits = [b for b in focus if b.was_blocked or b.outcome in ("timed_out", "refused", "deadlock")]
            if waits:  # the last waits, and what ran beside them, rather than every recent statement
                # ... and the latest statement, which a scenario's step is about (a COMMIT after them)
                latest = max(self.bars, key=lambda b: b.start_ns)
                focus = waits + ([latest] if latest not in waits else [])
                t1 = max(b.end_ns or now for b in focus)
        t0 = min(b.start_ns for b in focus)
        for b in focus:
            if b.budget is not None and b.budget.ms > 0 and (b.running or b.was_blocked) \
                    and not off_chart(b, t0, now):
                t1 = max(t1, b.start_ns + int(b.budget.ms * 1e6))
        span = max(MIN_SPAN_NS, t1 - t0)
        t0 -= span // 12  # a little of what came just before
        span = t1 - t0
        if self.live:
            # a steady axis: the span snaps up to 1-2-5 steps, so a live redraw moves only bar ends
            span = _snap_span(span)
        return t0, t0 + max(span, MIN_SPAN_NS)

    def window(self, now: int, view: View | None = None) -> tuple[int, int, list[Bar]]:
        """(t0, t1, bars that show in it)."""
        if view is None or view.follow:
            t0, t1 = self.follow_window(now)
        else:
            t0, t1 = view.end_ns - view.span_ns, view.end_ns
        visible = [b for b in self.bars if b.start_ns <= t1 and (b.end_ns or now) >= t0]
        return t0, t1, visible


FAR_BUDGET_NS = 60_000_000_000  # a budget ending further off than this (and than 3x the window) is off the chart


def off_chart(bar: "Bar", t0: int, now: int) -> bool:
    """Is ``bar``'s budget too far off to draw (MariaDB's metadata-lock default of a day,
    MySQL's of a year)?  Drawn to scale the axis would be a day long and every bar a dot:
    the timeline follows the wait and its marker says the budget in words instead."""
    if bar.budget is None or bar.budget.ms <= 0:
        return False
    end = bar.start_ns + int(bar.budget.ms * 1e6)
    shown = max(MIN_SPAN_NS, now - t0)
    return end - now > max(FAR_BUDGET_NS, 3 * shown)


def _snap_span(span_ns: int) -> int:
    unit = 1_000_000  # 1 ms
    while True:
        for m in (1, 1.5, 2, 3, 4, 5, 6, 8):
            if m * unit >= span_ns:
                return int(m * unit)
        unit *= 10


_MIN, _HOUR, _DAY = 60_000, 3_600_000, 86_400_000
TICK_STEPS_MS = (1, 2, 5, 10, 20, 50, 100, 200, 250, 500, 1000, 2000, 5000, 10000, 15000, 30000,
                 _MIN, 2 * _MIN, 5 * _MIN, 10 * _MIN, 15 * _MIN, 30 * _MIN, _HOUR, 2 * _HOUR, 3 * _HOUR,
                 6 * _HOUR, 12 * _HOUR, _DAY, 2 * _DAY, 7 * _DAY, 14 * _DAY, 30 * _DAY, 91 * _DAY, 182 * _DAY,
                 365 * _DAY)


def _nice_step(span_ns: int, cells: int) -> int:
    """A tick step (ns) giving at most one tick per 12 cells, so every tick has room for its label."""
    want = span_ns / max(1, cells // 12)
    for step_ms in TICK_STEPS_MS:
        if step_ms * 1e6 >= want:
            return int(step_ms * 1e6)
    years = 1
    while years * 365 * _DAY * 1e6 < want:
        years *= 2
    return int(years * 365 * _DAY * 1e6)


def _tick_label(ns: int) -> str:
    if ns == 0:
        return "0"
    return duration_words(ns / 1e6)


def lane_label(bar: Bar | None, now: int, room: int = 0, t0: int | None = None) -> tuple[str, str]:
    """Right-hand text for a lane and its style, in ``room`` cells (0: as long as it is);
    a lock's mode stays when its description has to be cut.  A wait whose budget is off
    the chart says so: 'budget 1 day, off the chart'."""
    if bar is None:
        return "", "dim"
    state = bar.state()
    if state == "blocked":
        who = names_text(bar.blockers)
        far = f" · budget {budget_amount(bar.budget)}, off the chart" \
            if t0 is not None and off_chart(bar, t0, now) else ""
        head = f"waits on {who}{far}"
        if bar.lock is None:
            return head, themed("bold $lr-blocked")
        if room and bar.lock.mode and cell_len(f"{head} · {bar.lock.mode}") > room:
            head = who  # narrow: the lock's mode stays before the words around it
        return head + " · " + lock_words(bar.lock, room - cell_len(head) - 3 if room else 0), themed("bold $lr-blocked")
    if state == "running":
        return f"running {seconds(now - bar.start_ns)}", themed("$lr-running")
    took = seconds((bar.end_ns if bar.end_ns is not None else now) - bar.start_ns)
    word = OUTCOME_WORDS.get(state, state)
    if state == "skipped":
        whose = f" of {names_text(bar.skipped_from)}" if bar.skipped_from else ""
        word = f"skipped {bar.skipped} row{'s' if bar.skipped != 1 else ''}{whose}"
    text = f"{word} in {took}"
    if bar.was_blocked:
        text += f" · waited on {names_text(bar.blockers)}"
    return text, BAR_STYLES.get(state, "white")


def render_timeline(model: TimelineModel, width: int, now: int, view: View | None = None,
                    compact: bool = False) -> Text:
    """One line per lane, then the axis: tick marks and their labels on one more line,
    or on the axis line itself when ``compact``.  Times on the axis count from the
    window's left edge.  On a cluster a lane is named with its node (C@node2)."""
    name_w = max([3] + [len(lane) + 2 + (len(model.nodes[lane]) + 1 if model.nodes.get(lane) else 0)
                        for lane in model.lanes])
    t0, t1, visible = model.window(now, view)
    span = max(1, t1 - t0)
    # the labels' column: a third of the width, or (from 120 columns) what the longest needs, up
    # to half of it, so that a lock's description is not cut there
    label_w = max(18, min(46, width // 3))
    if width >= 116:  # a terminal of 120 columns and up (less the timeline's borders)
        wanted = max([cell_len(lane_label(model.last_bar(lane), now, 0, t0)[0]) for lane in model.lanes] or [0])
        label_w = max(label_w, min(width // 2, wanted))
    area = max(10, width - name_w - label_w - 2)

    def col(t: int) -> int:
        return min(area - 1, max(0, int((t - t0) * area / span)))

    out = Text(no_wrap=True, overflow="crop")
    for lane in model.lanes:
        cells: list[tuple[str, str]] = [("─", themed("$lr-track"))] * area
        markers: list[tuple[int, str] | tuple[int, str, str]] = []  # (x, style) or (x, character, style)
        for bar in visible:
            if bar.session != lane:
                continue
            end = bar.end_ns if bar.end_ns is not None else now
            state = bar.state()
            color = BAR_STYLES.get(state, "white")
            x0, x1 = col(max(bar.start_ns, t0)), col(min(end, t1))
            bx = col(bar.blocked_since) if bar.blocked_since is not None else None
            bend = col(bar.blocked_until) if bar.blocked_until is not None else None
            for x in range(x0, max(x0, x1) + 1):
                blocked_part = bx is not None and x >= bx and (bend is None or x <= bend)
                cells[x] = ("█" if blocked_part else "▬", color)
            if bar.budget is not None and (bar.running or bar.was_blocked or state in ("refused", "timed_out")):
                at = bar.start_ns + int(bar.budget.ms * 1e6)
                if t0 <= at <= t1:
                    markers.append((col(at), themed("bold $lr-budget on $lr-budget-running") if bar.running else themed("bold $lr-budget")))
                elif at > t1 and bar.running and off_chart(bar, t0, now):
                    markers.append((area - 1, "»", themed("bold $lr-budget on $lr-budget-running")))
        for mx, *mark in markers:
            ch, style = mark if len(mark) == 2 else ("┃", mark[0])
            cells[mx] = (ch, style)
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
        label, lstyle = lane_label(model.last_bar(lane), now, label_w, t0)
        cut = Text(label)
        cut.truncate(label_w, overflow="ellipsis", pad=True)
        out.append("  ")
        out.append(cut.plain, style=lstyle)
        out.append("\n")
    # axis
    step = _nice_step(span, area)
    ticks: list[tuple[int, str]] = []
    t = 0
    while t0 + t <= t1:
        ticks.append((col(t0 + t), _tick_label(t)))
        t += step
    out.append(" " * name_w)
    if compact:  # "┴0 ──┴1 s ──┴2 s": ticks and labels on one line
        axis = ["─"] * area
        free = 0
        for x, text in ticks:
            if x < free:
                continue
            axis[x] = "┴"
            if x + 1 + len(text) < area:
                axis[x + 1: x + 1 + len(text)] = list(text)
                free = x + len(text) + 2
            else:
                free = x + 1
        out.append("".join(axis), style=themed("$lr-muted"))
        return out
    axis = ["─"] * area
    for x, _ in ticks:
        axis[x] = "┴"
    out.append("".join(axis), style=themed("$lr-axis-second"))
    out.append("\n")
    line = [" "] * (area + label_w + 2)
    for x, text in ticks:
        if x + len(text) <= len(line) and all(c == " " for c in line[max(0, x - 1): x + len(text) + 1]):
            line[x: x + len(text)] = list(text)
    out.append(" " * name_w)
    out.append("".join(line).rstrip(), style=themed("$lr-muted"))
    return out


def window_words(model: TimelineModel, now: int, view: View) -> str:
    """What the timeline shows, for its title: 'following the action · 4 s' or the scrolled window."""
    t0, t1, _ = model.window(now, view)
    first, _ = model.extent(now)
    span = seconds(t1 - t0)
    if view.follow:
        return f"following the action · {span} window"
    return f"history {seconds(max(0, t0 - first))}–{seconds(max(0, t1 - first))} after the first statement " \
           f"· {span} window · End follows again"


class Timeline(Widget, can_focus=True):
    """Draws a TimelineModel; ``refresh()`` it from a timer while anything runs.

    Focused (Tab, or a click), it scrolls and zooms through the race's history:
    Left/Right move the window, +/- zoom, Home shows everything, End follows the
    action again.  The mouse wheel scrolls it too.
    """

    DEFAULT_CSS = """
    Timeline { height: auto; }
    """
    BINDINGS = [
        Binding("left", "scroll_time(-1)", "Earlier"),
        Binding("right", "scroll_time(1)", "Later"),
        Binding("plus,equals_sign", "zoom_time(0.5)", "Zoom in"),
        Binding("minus", "zoom_time(2)", "Zoom out"),
        Binding("home", "whole", "All"),
        Binding("end", "follow", "Follow"),
    ]

    def __init__(self, model: TimelineModel, **kwargs):
        super().__init__(**kwargs)
        self.model = model
        self.clock = perf_counter_ns
        self.view = View()
        self.compact = False
        self._drawn: Text | None = None
        self._key: tuple = ()
        self._words = ""
        self.title_text = "wait-budget timeline"

    def on_resize(self, event) -> None:
        self._drawn = None  # drawn for the old width: the axis and bars follow the new one
        self.refresh()

    def get_content_height(self, container, viewport, width: int) -> int:
        return len(self.model.lanes) + (1 if self.compact else 2)

    def set_title(self, text: str) -> None:
        self.title_text = text
        self._drawn = None
        self.refresh()

    def set_compact(self, compact: bool) -> None:
        if compact != self.compact:
            self.compact = compact
            self.set_class(compact, "compact")
            self._drawn = None
            self.refresh(layout=True)

    def _retitle(self, now: int | None = None, focused: bool | None = None) -> None:
        """Title and subtitle for what is on screen now: set before the repaint (set while
        drawing, the border showed them one key press late)."""
        now = self.clock() if now is None else now
        words = window_words(self.model, now, self.view)
        if words != self._words:
            self._words = words
            self.border_subtitle = words
        # a compact timeline has no bottom border: a scrolled window says so in the title
        title = words if self.compact and not self.view.follow else self.title_text
        if (self.has_focus if focused is None else focused):  # the keys it answers now, where typing no longer goes to a panel
            keys = "←/→ earlier/later · +/- zoom · Home all · End follows"
            title = f"◆ timeline focused: {keys} · {title}" if (self.size.width or 80) >= 110 else \
                f"◆ timeline focused: {keys}"
        if self.border_title != title:
            self.border_title = title

    def _draw(self) -> Text:
        now = self.clock()
        self._retitle(now)
        return render_timeline(self.model, self.content_size.width or 80, now, self.view, self.compact)

    def on_focus(self) -> None:
        self._retitle(focused=True)
        self.refresh()

    def on_blur(self) -> None:
        self._retitle(focused=False)
        self.refresh()

    def update(self) -> None:
        """Redraw after an event: always."""
        self._drawn = None
        self._retitle()
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

    # ------------------------------------------------------------ scrolling and zooming
    def _manual(self) -> View:
        """The window on screen now, as a manual view (leaving follow mode)."""
        now = self.clock()
        t0, t1, _ = self.model.window(now, self.view)
        return View(False, t1, t1 - t0)

    def _set_view(self, view: View, follow_at_present: bool = False) -> None:
        now = self.clock()
        first, last = self.model.extent(now)
        if not view.follow:
            view.span_ns = max(MIN_MANUAL_SPAN_NS, view.span_ns)
            view.end_ns = max(view.end_ns, first + view.span_ns // 4)  # keep some history on screen
            if follow_at_present and view.end_ns >= last and self.model.live:
                view = View()  # scrolled forward into the present: follow it
            else:
                view.end_ns = min(view.end_ns, last + view.span_ns // 4)
        self.view = view
        self.update()

    def action_scroll_time(self, direction: int) -> None:
        view = self._manual()
        view.end_ns += direction * view.span_ns // 4
        self._set_view(view, follow_at_present=direction > 0)

    def action_zoom_time(self, factor: float) -> None:
        view = self._manual()  # the right edge stays: zooming out brings in what came before
        view.span_ns = int(view.span_ns * factor)
        self._set_view(view)

    def action_whole(self) -> None:
        first, last = self.model.extent(self.clock())
        span = last - first
        self._set_view(View(False, last + span // 50, span + span // 25))

    def action_follow(self) -> None:
        self._set_view(View())

    def on_mouse_scroll_up(self, event) -> None:
        event.stop()
        self.action_scroll_time(-1)

    def on_mouse_scroll_down(self, event) -> None:
        event.stop()
        self.action_scroll_time(1)
