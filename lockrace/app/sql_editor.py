"""Ctrl+N: a multi-line SQL editor for the focused session."""

from __future__ import annotations

from bisect import bisect_right

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, TextArea

from .sql_highlight import sql_spans


class SqlArea(TextArea):
    """A TextArea that colours SQL without a tree-sitter grammar (sql_highlight's scanner)."""

    def _build_highlight_map(self) -> None:
        self._line_cache.clear()
        highlights = self._highlights
        highlights.clear()
        lines = self.text.split("\n")
        starts, at = [], 0
        for line in lines:
            starts.append(at)
            at += len(line) + 1
        names = {"keyword": "keyword", "string": "string", "number": "number", "comment": "comment",
                 "name": "type"}
        for start, end, kind in sql_spans(self.text):
            row = max(0, bisect_right(starts, start) - 1)
            while start < end and row < len(lines):
                line = lines[row]
                col0, col1 = start - starts[row], min(end - starts[row], len(line))
                # the map is in bytes of the line's UTF-8
                b0, b1 = len(line[:col0].encode()), len(line[:col1].encode())
                highlights[row].append((b0, b1, names[kind]))
                row += 1
                start = starts[row] if row < len(starts) else end


class SqlEditor(ModalScreen[str | None]):
    """Returns the SQL text (Ctrl+R) or None (Esc)."""

    BINDINGS = [
        Binding("ctrl+r", "run", "Run in session", priority=True),
        Binding("escape", "dismiss(None)", "Cancel"),
    ]

    def __init__(self, session: str, text: str = ""):
        super().__init__()
        self.session = session
        self.text = text

    def compose(self) -> ComposeResult:
        with Vertical(id="editor"):
            yield Label(f"Multi-line SQL for session {self.session}   Ctrl+R runs it · Esc cancels", id="editor-title")
            yield SqlArea(self.text, language=None, id="editor-area", show_line_numbers=True)

    def on_mount(self) -> None:
        self.query_one(TextArea).focus()

    def action_run(self) -> None:
        text = self.query_one(TextArea).text.strip()
        self.dismiss(text or None)
