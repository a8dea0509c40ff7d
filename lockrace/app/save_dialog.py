"""Ctrl+S: where to save the race (a .race scenario and its .txt transcript beside it).

The path line starts with a name in the current directory; an existing file is
overwritten only after a second Enter; Esc saves nothing."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label

from .palette import themed


def race_path(typed: str, base: Path) -> Path:
    """The .race file a typed path names (relative to ``base``; a .txt or no suffix becomes .race)."""
    path = Path(typed.strip()).expanduser()
    if not path.is_absolute():
        path = base / path
    if path.suffix in (".txt", ".race", ""):
        path = path.with_suffix(".race")
    else:
        path = path.with_name(path.name + ".race")
    return path


def targets(path: Path) -> tuple[Path, Path]:
    return path, path.with_suffix(".txt")


class SaveDialog(ModalScreen[Path | None]):
    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel")]

    def __init__(self, default: Path, base: Path, note: str = ""):
        super().__init__()
        self.default = default
        self.base = base
        self.note = note
        self._confirm: Path | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="save-dialog", classes="spec-dialog"):
            yield Label("Save the race: a .race scenario, and its transcript (.txt) beside it.  "
                        "Enter saves, Esc cancels.", classes="spec-dialog-title")
            yield Input(value=str(self.default), id="save-path")
            yield Label(Text(self.note, style=themed("$lr-warning")) if self.note else "", id="save-note")

    def on_mount(self) -> None:
        line = self.query_one("#save-path", Input)
        line.focus()
        line.cursor_position = len(line.value)

    def _say(self, text: str, style: str) -> None:
        self.query_one("#save-note", Label).update(Text(text, style=style))

    def on_input_changed(self, event: Input.Changed) -> None:
        self._confirm = None

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if not event.value.strip():
            self._say("✗ type a file name", themed("bold $lr-failure"))
            return
        path = race_path(event.value, self.base)
        if not path.parent.is_dir():
            self._say(f"✗ no such directory: {path.parent}", themed("bold $lr-failure"))
            return
        existing = [p.name for p in targets(path) if p.exists()]
        if existing and self._confirm != path:
            self._confirm = path
            self._say(f"{' and '.join(existing)} already exist{'s' if len(existing) == 1 else ''} in {path.parent}: "
                      "Enter again overwrites, Esc cancels", themed("bold $lr-warning"))
            return
        self.dismiss(path)
