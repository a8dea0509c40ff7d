"""Modal lists for isolation specs: which permutation to step, which sessions to show."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList, SelectionList
from textual.widgets.option_list import Option

from ..scenario.model import Scenario
from .player import permutation_text
from .palette import themed


class PermutationPicker(ModalScreen[int | None]):
    """Every permutation of a spec with its step names; Enter picks, Esc keeps the current one."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Close")]

    def __init__(self, scenario: Scenario, current: int = 0):
        super().__init__()
        self.scenario = scenario
        self.current = current

    def compose(self) -> ComposeResult:
        perms = self.scenario.order()
        with Vertical(id="permutations", classes="spec-dialog"):
            how = "listed in the spec" if self.scenario.explicit_permutations else "every interleaving: the spec lists none"
            yield Label(f"{self.scenario.name}: {len(perms)} permutations ({how}).  "
                        "Enter steps the highlighted one from a fresh setup; Esc closes.", classes="spec-dialog-title")
            width = len(str(len(perms)))
            options = []
            for i, perm in enumerate(perms):
                label = Text.assemble((f"{i + 1:>{width}}  ", themed("bold $lr-muted")), (permutation_text(perm), "bold"))
                sessions: list[str] = []
                for entry in perm:
                    session = self.scenario.step(entry.step).session
                    if not sessions or sessions[-1] != session:
                        sessions.append(session)
                label.append(f"   ({' → '.join(sessions)})", style=themed("$lr-muted"))
                options.append(Option(label, id=f"perm-{i}"))
            yield OptionList(*options, id="permutation-list")

    def on_mount(self) -> None:
        lst = self.query_one(OptionList)
        lst.focus()
        lst.highlighted = self.current if 0 <= self.current < lst.option_count else 0

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(event.option_index)


class SessionChooser(ModalScreen[list[str] | None]):
    """Tick the sessions the panels show (at most ``limit``); hidden ones keep running."""

    BINDINGS = [
        Binding("escape", "dismiss(None)", "Close"),
        Binding("enter", "confirm", "Show these", priority=True),
    ]

    def __init__(self, names: list[str], shown: list[str], limit: int = 4):
        super().__init__()
        self.names = names
        self.shown = shown
        self.limit = limit

    def compose(self) -> ComposeResult:
        with Vertical(id="session-chooser", classes="spec-dialog"):
            yield Label(f"Sessions shown in the panels (at most {self.limit}).  Space ticks or unticks, "
                        "Enter shows them, Esc closes.  Hidden sessions keep running; their timeline lanes stay.",
                        classes="spec-dialog-title")
            yield SelectionList[str](*[(name, name, name in self.shown) for name in self.names], id="session-list")
            yield Label("", id="session-chooser-note")

    def on_mount(self) -> None:
        self.query_one(SelectionList).focus()

    def on_selection_list_selected_changed(self, event: SelectionList.SelectedChanged) -> None:
        count = len(event.selection_list.selected)
        note = self.query_one("#session-chooser-note", Label)
        if count > self.limit:
            note.update(Text(f"{count} ticked: untick {count - self.limit} (there are {self.limit} panels)",
                             style=themed("bold $lr-failure")))
        else:
            note.update(Text(f"{count} of {self.limit} panels", style=themed("$lr-muted")))

    def action_confirm(self) -> None:
        chosen = self.query_one(SelectionList).selected
        if not chosen or len(chosen) > self.limit:
            self.app.bell()
            self.notify(f"Tick between 1 and {self.limit} sessions.", severity="warning")
            return
        self.dismiss([name for name in self.names if name in chosen])
