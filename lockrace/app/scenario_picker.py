"""A modal list of the built-in scenarios: title, engines and lesson."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList, Static
from textual.widgets.option_list import Option

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

    def __init__(self, scenarios: list[Scenario], engine: str):
        super().__init__()
        self.scenarios = scenarios
        self.engine = engine

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

    def on_mount(self) -> None:
        lst = self.query_one(OptionList)
        lst.focus()
        if self.scenarios:
            lst.highlighted = 0

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        sc = self._by_id(event.option.id)
        if sc is not None:
            self.query_one("#picker-detail", Static).update(describe(sc))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self._by_id(event.option.id))

    def _by_id(self, name: str | None) -> Scenario | None:
        return next((s for s in self.scenarios if s.name == name), None)
