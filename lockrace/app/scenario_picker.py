"""A modal list of the built-in scenarios (title, engines and lesson), and a
line to open any scenario file by path: a .race file or a PostgreSQL
isolation .spec."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from ..scenario.errors import ScenarioError
from ..scenario.library import resolve
from ..scenario.model import Scenario


def reflow(text: str) -> str:
    """Paragraphs of a hand-wrapped lesson as single lines, so the screen wraps them."""
    paragraphs = [" ".join(p.split()) for p in text.split("\n\n")]
    return "\n\n".join(p for p in paragraphs if p)


def describe(sc: Scenario) -> Text:
    text = Text()
    text.append(f"{sc.title or sc.name}\n", style="bold")
    text.append(f"{sc.name}", style="italic #9e9e9e")
    text.append(f"   engines: {', '.join(sc.engines)}   {len(sc.steps)} steps\n\n", style="#9e9e9e")
    text.append(reflow(sc.lesson) or "(no lesson text)")
    if sc.source:
        text.append(f"\n\nsource: {sc.source}", style="dim")
    return text


class ScenarioPicker(ModalScreen[Scenario | None]):
    BINDINGS = [
        Binding("escape", "dismiss(None)", "Close"),
        Binding("f9", "dismiss(None)", "Close", show=False),
    ]

    def __init__(self, scenarios: list[Scenario], engine: str, path_first: bool = False):
        super().__init__()
        self.scenarios = scenarios
        self.engine = engine
        self.path_first = path_first

    def compose(self) -> ComposeResult:
        with Vertical(id="picker"):
            yield Label("Load a scenario  (Enter loads, Esc closes; ↔ = written for the other engine: loading it switches)",
                        id="picker-title")
            with Horizontal():
                options = []
                width = max((len(sc.name) for sc in self.scenarios), default=10) + 2
                for sc in self.scenarios:
                    mark = "" if sc.runs_on(self.engine) else " ↔"
                    label = Text.assemble((f"{sc.name:<{width}}", "bold"), (f"{','.join(sc.engines):<9}", "#9e9e9e"),
                                          (mark, "#ffd75f"))
                    options.append(Option(label, id=sc.name))
                picker_list = OptionList(*options, id="picker-list")
                picker_list.styles.width = width + 9 + 8
                yield picker_list
                with VerticalScroll(id="picker-detail-box"):
                    yield Static(id="picker-detail")
            yield Label("", id="picker-path-note")
            yield Input(placeholder="or open a file: path to a .race scenario or an isolation .spec, then Enter",
                        id="picker-path")

    def on_mount(self) -> None:
        lst = self.query_one(OptionList)
        lst.focus()
        if self.scenarios:
            lst.highlighted = 0
        if self.path_first or not self.scenarios:
            self.focus_path()

    def focus_path(self) -> None:
        self.query_one("#picker-path", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        path = event.value.strip()
        if not path:
            return
        note = self.query_one("#picker-path-note", Label)
        try:
            scenario = resolve(str(Path(path).expanduser()))
        except ScenarioError as exc:
            note.update(Text(f"✗ {exc}", style="bold #ff5f5f"))
            return
        self.dismiss(scenario)

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        sc = self._by_id(event.option.id)
        if sc is not None:
            self.query_one("#picker-detail", Static).update(describe(sc))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self._by_id(event.option.id))

    def _by_id(self, name: str | None) -> Scenario | None:
        return next((s for s in self.scenarios if s.name == name), None)
