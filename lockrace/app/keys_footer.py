"""The footer: the keys a user needs, fitted to the terminal's width.

Textual's own footer lists bindings in order and cuts the line where the
terminal ends (at 80 columns it stopped at F5, at 120 in the middle of F9's
name).  This one knows which keys matter most: F1 help, F5 step, F9
scenarios, Ctrl+S save and Ctrl+Q quit always show; the others show as room
allows, in key order, with shorter names first where that makes them fit.
A click on a key runs it.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.cells import cell_len
from rich.text import Text
from textual import events
from textual.widget import Widget

from .palette import themed


@dataclass(frozen=True)
class FooterKey:
    key: str  # as shown: F1, ^S
    name: str  # what it does, in a word or two
    short: str  # a shorter name, for narrow terminals
    action: str  # the app action a click runs
    rank: int  # 0 shows first; the highest rank goes first when room is short


KEYS = [
    FooterKey("F1", "Help", "Help", "help", 0),
    FooterKey("F2", "Cancel", "Cancel", "cancel", 6),
    FooterKey("F3", "Rollback", "Rollback", "rollback", 7),
    FooterKey("F4", "Reset", "Reset", "reset", 8),
    FooterKey("F5", "Step", "Step", "step", 1),
    FooterKey("F6", "Run all", "All", "run_to_end", 10),
    FooterKey("F7", "Auto-play", "Auto", "autoplay", 11),
    FooterKey("F8", "Engine", "Engine", "switch_engine", 12),
    FooterKey("F9", "Scenarios", "Scenarios", "pick_scenario", 2),
    FooterKey("F10", "Zoom", "Zoom", "zoom", 9),
    FooterKey("F12", "Locks", "Locks", "lock_view", 5),
    FooterKey("^S", "Save", "Save", "save", 3),
    FooterKey("^P", "Palette", "Cmds", "command_palette", 13),
    FooterKey("^Q", "Quit", "Quit", "quit", 4),
]


def footer_layout(width: int, keys: list[FooterKey] = KEYS) -> list[tuple[FooterKey, str]]:
    """The keys that fit in ``width`` cells, in key order, each with the name it shows."""
    shown = sorted(keys, key=lambda k: k.rank)
    while shown:
        for use_short in (False, True):
            picked = [k for k in keys if k in shown]
            names = [(k, k.short if use_short else k.name) for k in picked]
            if line_width(names) <= width:
                return names
        shown = shown[:-1]  # the least needed key goes
    return []


def line_width(names: list[tuple[FooterKey, str]]) -> int:
    # " F1 Help" for each: a space, the key, a space, its name
    return sum(1 + cell_len(k.key) + 1 + cell_len(name) for k, name in names)


def footer_text(width: int) -> tuple[Text, list[tuple[int, int, str]]]:
    """The footer line and where each key is on it (start, end, action)."""
    text = Text(no_wrap=True, overflow="crop")
    spans = []
    for key, name in footer_layout(width):
        start = text.cell_len
        text.append(" ")
        text.append(key.key, style=themed("bold $lr-on-badge on $lr-accent"))
        text.append(f" {name}", style=themed("$lr-lesson"))
        spans.append((start, text.cell_len, key.action))
    return text, spans


class KeysFooter(Widget):
    DEFAULT_CSS = """
    KeysFooter { height: 1; dock: bottom; background: $panel; }
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._spans: list[tuple[int, int, str]] = []

    def render(self) -> Text:
        text, self._spans = footer_text(self.size.width or 80)
        return text

    def on_resize(self, event: events.Resize) -> None:
        self.refresh()

    async def on_click(self, event: events.Click) -> None:
        for start, end, action in self._spans:
            if start <= event.x < end:
                event.stop()
                await self.app.run_action(action)
                return
