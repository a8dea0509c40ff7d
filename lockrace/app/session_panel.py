"""One session's panel: status badges, a live wait counter, the transcript,
the next scenario step and an input line.

A panel is one of four slots; it shows one session's ``SessionLog`` and can
be switched to another session's (an isolation spec with more than four
sessions), redrawing that session's whole transcript.
"""

from __future__ import annotations

from collections import deque

from rich.cells import cell_len
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Input, RichLog, Static

from ..dialects import dialect_for
from ..core.events import Event
from .completion import complete
from .session_log import TABLE_STYLE, SessionLog
from .sql_highlight import SqlHighlighter
from .status import Badge, lock_words
from .palette import themed


PANEL_MAX_LINES = 1000  # lines a panel keeps on screen (its session log keeps more, also bounded)
DRAW_BATCH = 20  # transcript lines drawn per loop turn


def badge_line(act: Badge | None, txn: Badge, width: int = 0) -> Text:
    """The activity badge, then the transaction badge, on one line of ``width``
    cells (0: not known yet).  Where both do not fit (a 2x2 layout at 80
    columns), the transaction's badge takes its short form ("autocommit",
    "ROLLBACK needed") and the activity's details give way, never its short
    form ("BLOCKED by client pid 23509", "timed out"): what does not fit then
    is the end of the line.  The transcript's note below says it whole."""
    tail = f" {txn.label} "
    label = act.label if act is not None else ""
    if width and act is not None and cell_len(label) + 3 + cell_len(tail) > width:
        tail = f" {txn.short or txn.label} "
        room = width - 3 - cell_len(tail)  # the activity badge's two spaces and the gap
        keep = act.short or label
        if cell_len(label) > room:
            if room > cell_len(keep) and act.key != "blocked":  # a lock is never shown cut: the lock line has it
                cut = Text(label)
                cut.truncate(room, overflow="ellipsis")
                label = cut.plain
            else:
                label = keep
    text = Text()
    if act is not None:
        text.append(f" {label} ", style=act.style)
        text.append(" ")
    text.append(tail, style=txn.style)
    if width and text.cell_len > width:
        text.truncate(width, overflow="ellipsis")
    return text


class WaitLine(Widget):
    """'waiting 1.2 s of 2 s lock_timeout budget': repainted by the app's timer without any relayout."""

    DEFAULT_CSS = "WaitLine { height: 1; }"

    def __init__(self, status_of, **kwargs):
        super().__init__(**kwargs)
        self._status_of = status_of
        self._text = ""

    def tick(self) -> None:
        text = self._status_of().wait_line()
        if text != self._text:  # the counter shows tenths: repaint only when they change
            self._text = text
            self.refresh()

    def render(self) -> Text:
        self._text = self._status_of().wait_line()
        return Text(f" {self._text}", style=themed("bold $lr-blocked"), no_wrap=True, overflow="ellipsis")


class LockLine(Widget):
    """What a blocked statement waits for, whole: 'accounts row (index PRIMARY of table
    accounts, id=1) X,REC_NOT_GAP'.  From 120 columns it takes a second line rather than
    cut anything; narrower, the relation gives way and the mode stays."""

    DEFAULT_CSS = "LockLine { height: auto; max-height: 2; }"

    def __init__(self, status_of, **kwargs):
        super().__init__(**kwargs)
        self._status_of = status_of

    def waited_lock(self):
        run = self._status_of().running
        return run.lock if run is not None and run.blocked_since is not None else None

    def _words(self, width: int) -> tuple[str, int]:
        lock = self.waited_lock()
        if lock is None:
            return "", 1
        whole = f" waits for {lock.describe()}"
        if cell_len(whole) <= width:
            return whole, 1
        terminal = getattr(self.app, "terminal_size", None) or (self.app.size.width, 0)
        if terminal[0] >= 120:  # from 120 columns a lock is never cut: a second line instead
            return whole, 2
        return " " + lock_words(lock, width - 1), 1

    def get_content_height(self, container, viewport, width: int) -> int:
        return self._words(width)[1]

    def render(self) -> Text:
        text, lines = self._words(self.size.width or 40)
        return Text(text, style=themed("$lr-blocked"), no_wrap=lines == 1, overflow="ellipsis")


class SqlInput(Input):
    """An Input with a per-session history on up / down."""

    BINDINGS = [
        Binding("up", "history(-1)", "Previous statement", show=False),
        Binding("down", "history(1)", "Next statement", show=False),
        Binding("ctrl+@,ctrl+space", "complete", "Complete a name", show=False),
        Binding("alt+left", "scroll_sideways(-1)", "Result left", show=False),
        Binding("alt+right", "scroll_sideways(1)", "Result right", show=False),
    ]

    def __init__(self, **kwargs):
        super().__init__(highlighter=SqlHighlighter(), **kwargs)
        self.cursor_blink = False  # a blinking cursor repaints twice a second, forever
        self.history: list[str] = []
        self._pos = 0

    async def _on_key(self, event: events.Key) -> None:
        if event.key.startswith("alt+"):
            # A terminal sends Alt+C as ESC c, which arrives as the key "alt+c" carrying the
            # character "c": a shortcut (Alt+A..D switch panels), never text for the SQL
            event.prevent_default()  # Input's own handler (Textual calls every class's) would type it

    def action_complete(self) -> None:
        """Ctrl+Space: the sandbox's table or column name the word before the cursor begins."""
        names = getattr(self.app, "sandbox_names", None)
        if names is None:
            return
        text, cursor, choices = complete(self.value, self.cursor_position, names.names())
        if text != self.value:
            self.value, self.cursor_position = text, cursor
        if len(choices) > 1:
            self.app.notify("could be: " + ", ".join(choices[:12]) + (" …" if len(choices) > 12 else ""),
                            timeout=4)
        elif not choices:
            self.app.notify("no table or column of the sandbox begins so", timeout=2)

    def action_scroll_sideways(self, direction: int) -> None:
        """Alt+Left / Alt+Right: a wide result scrolls sideways (it is not wrapped)."""
        node = self.parent
        while node is not None and not isinstance(node, SessionPanel):
            node = node.parent
        if node is not None:
            log = node.transcript
            log.scroll_to(x=max(0, log.scroll_x + direction * max(8, log.size.width // 2)), animate=False)

    def remember_position(self) -> None:
        self._pos = len(self.history)

    def remember(self, sql: str) -> None:
        if not self.history or self.history[-1] != sql:
            self.history.append(sql)
        self._pos = len(self.history)

    def action_history(self, delta: int) -> None:
        if not self.history:
            return
        self._pos = max(0, min(len(self.history), self._pos + delta))
        self.value = self.history[self._pos] if self._pos < len(self.history) else ""
        self.cursor_position = len(self.value)


class SessionPanel(Vertical):
    """Panel for session ``name``; the app feeds it engine events."""

    class Submitted(Message):
        def __init__(self, panel: "SessionPanel", sql: str):
            super().__init__()
            self.panel = panel
            self.sql = sql

    def __init__(self, name: str, **kwargs):
        super().__init__(id=f"panel-{name}", classes="panel", **kwargs)  # the id names the slot, not the session
        self.slot = name
        self.session_log = SessionLog(name)
        self.border_title = f"Session {name}"
        self._shown: tuple = ()
        self._next_text: str | None = ""
        self._pending: deque[tuple[str, str]] = deque()  # lines waiting to be drawn, a few per frame
        self._drawn_width: int | None = None  # the width the transcript was wrapped for
        self._flushing = False

    @property
    def session(self) -> str:
        return self.session_log.name

    @property
    def status(self):
        return self.session_log.status

    @property
    def flavor(self) -> str:
        return self.session_log.flavor

    @property
    def lines(self) -> list[str]:
        """The plain transcript, for export and tests."""
        return self.session_log.lines

    def compose(self) -> ComposeResult:
        yield Static(self._badges(), classes="badges")
        self._wait_line = WaitLine(lambda: self.status, classes="wait-line")
        yield self._wait_line
        self._lock_line = LockLine(lambda: self.status, classes="lock-line")
        yield self._lock_line
        log = RichLog(wrap=True, markup=False, highlight=False, auto_scroll=True, min_width=16,
                      max_lines=PANEL_MAX_LINES, classes="transcript")
        log.can_focus = False
        yield log
        yield Static("", classes="next-step")
        yield SqlInput(placeholder=f"{self.name_hint()} type SQL, Enter runs it in {self.session}",
                       classes="sql-input", id=f"input-{self.slot}")

    def name_hint(self) -> str:
        return f"{self.session}>"

    # ------------------------------------------------------------ parts
    @property
    def input(self) -> SqlInput:
        return self.query_one(SqlInput)

    @property
    def transcript(self) -> RichLog:
        return self.query_one(RichLog)

    def _badges(self, width: int = 0) -> Text:
        return badge_line(self.status.activity(), self.status.transaction(), width)

    def on_resize(self, event: events.Resize) -> None:
        self.call_after_refresh(self.refresh_status)  # the badges fit the new width
        width = event.size.width
        if self._drawn_width not in (None, width) and self.session_log.entries:
            # a RichLog wraps at write time: rewrap the transcript for the new width (and show its end)
            self.call_after_refresh(self.redraw, self.session_log)
        self._drawn_width = width

    def refresh_status(self) -> None:
        """Update badges and the blocked look, touching the DOM only when something changed
        (a changed Static or class costs a relayout)."""
        line = self.query_one(".badges", Static)
        badges = self._badges(line.size.width)
        blocked = self.status.running is not None and self.status.running.blocked_since is not None
        lock = self._lock_line.waited_lock()
        shown = (badges.plain, tuple(str(s.style) for s in badges.spans), blocked, lock, self.status.ident)
        if shown == self._shown:
            return
        self._shown = shown
        self._retitle()
        line.update(badges, layout=False)  # one line, always: no relayout
        shrunk = False
        if self._wait_line.display != blocked:
            self._wait_line.display = blocked
            shrunk = True
        if self._lock_line.display != (lock is not None):
            self._lock_line.display = lock is not None
            shrunk = True
        self._lock_line.refresh(layout=True)
        if shrunk:  # the transcript got or lost lines: keep its end (the statement that waits) in view
            self.call_after_refresh(self.transcript.scroll_end, animate=False)
        self.set_class(blocked, "blocked")

    def _retitle(self) -> None:
        """'Session A · pid 4242' (PostgreSQL) or 'Session A · thread 17' (MariaDB/MySQL),
        '@ node' on a cluster: the id the server's views and other tools know it by."""
        log = self.session_log
        title = f"Session {log.name} @ {log.node}" if log.node else f"Session {log.name}"
        ident = self.status.ident
        if ident:
            title += f" · {dialect_for(log.flavor).session_ident(ident)}"
        if self.border_title != title:
            self.border_title = title

    def tick(self) -> None:
        if self.status.running is not None and self.status.running.blocked_since is not None:
            self._wait_line.tick()

    # ------------------------------------------------------------ content
    def reset(self, flavor: str, heading: str = "") -> None:
        """Show a fresh log of the same session."""
        log = SessionLog(self.session, flavor)
        if heading:
            log.write(heading, "dim italic")
        self.show(log)

    def show(self, log: SessionLog) -> None:
        """Show ``log``'s session in this panel: title, input hint, whole transcript, badges."""
        self.session_log = log
        self._retitle()
        self.input.placeholder = f"{self.name_hint()} type SQL, Enter runs it in {log.name}"
        self._shown = ()
        self.transcript.clear()
        self._pending.clear()
        if log.entries:
            # drawn once the panel has its size (it may just have been un-hidden): a RichLog wraps at write time
            self.call_after_refresh(self.redraw, log)
        self.show_next(log.next_text)
        self.refresh_status()

    def redraw(self, log: SessionLog) -> None:
        if log is not self.session_log:
            return
        self.transcript.clear()
        self._pending.clear()
        for line, style in list(log.entries)[-PANEL_MAX_LINES:]:
            self._draw(line, style)

    def _draw(self, line: str, style: str) -> None:
        """Queue a line: lines are written DRAW_BATCH at a time, one batch per loop turn, so a
        200-row result never holds the loop (and keys) for the whole of its drawing."""
        self._pending.append((line, style))
        if not self._flushing:
            self._flushing = True
            self.call_later(self._flush)

    def _flush(self) -> None:
        self._flushing = False
        if not self.is_attached:
            self._pending.clear()
            return
        log = self.transcript
        for _ in range(min(DRAW_BATCH, len(self._pending))):
            line, style = self._pending.popleft()
            shown = line
            stripped = line.lstrip(" ")
            if len(stripped) != len(line):  # keep psql's alignment: wrapping would drop leading spaces
                shown = "\u00a0" * (len(line) - len(stripped)) + stripped
            table = style == TABLE_STYLE
            if table:  # a result's rows: unwrapped, a wide one scrolls sideways (Alt+Left / Alt+Right)
                log.wrap = False
            log.write(Text(shown, style="" if table else style), scroll_end=True)
            log.wrap = True
        if self._pending:
            self._flushing = True
            self.set_timer(0.005, self._flush)  # let input and repaint in between batches

    @property
    def drawing(self) -> bool:
        """Lines still waiting to be drawn (tests wait for this to settle)."""
        return bool(self._pending)

    def write(self, line: str, style: str = "") -> None:
        self._draw(*self.session_log.write(line, style))

    def handle(self, event: Event) -> None:
        for line, style in self.session_log.apply(event):
            self._draw(line, style)
        self.refresh_status()

    def show_next(self, text: str | None) -> None:
        self.session_log.next_text = text
        if text == self._next_text:
            return
        self._next_text = text
        box = self.query_one(".next-step", Static)
        box.update(Text(text, style="bold") if text else "")
        box.display = bool(text)
        self.set_class(bool(text), "has-next")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        sql = event.value.strip()
        if not sql:
            return
        self.input.remember(sql)
        self.input.value = ""
        self.post_message(self.Submitted(self, sql))

    def on_click(self) -> None:
        self.input.focus()
