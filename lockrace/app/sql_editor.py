"""Ctrl+N: a multi-line SQL editor for the focused session."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, TextArea


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
            yield TextArea(self.text, language=None, id="editor-area", show_line_numbers=True)

    def on_mount(self) -> None:
        self.query_one(TextArea).focus()

    def action_run(self) -> None:
        text = self.query_one(TextArea).text.strip()
        self.dismiss(text or None)
