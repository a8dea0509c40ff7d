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
from .palette import themed


def reflow(text: str) -> str:
    """Paragraphs of a hand-wrapped lesson as single lines, so the screen wraps them."""
    paragraphs = [" ".join(p.split()) for p in text.split("\n\n")]
    return "\n\n".join(p for p in paragraphs if p)


def describe(sc: Scenario) -> Text:
    text = Text()
    text.append(f"{sc.title or sc.name}\n", style="bold")
    text.append(f"{sc.name}", style=themed("italic $lr-muted"))
    text.append(f"   engines: {', '.join(sc.engines)}   {len(sc.steps)} steps\n\n", style=themed("$lr-muted"))
    text.append(reflow(sc.lesson) or "(no lesson text)")
    if sc.source:
        text.append(f"\n\nsource: {sc.source}", style="dim")
    return text


def is_subsequence(query: str, text: str) -> bool:
    it = iter(text)
    return all(ch in it for ch in query)


def match_rank(sc: Scenario, query: str) -> int | None:
    """How well ``sc`` matches what was typed (lower is better; None: not at all).

    0 the name contains it, 1 every word is in the name or title, 2 every word is
    somewhere in name, title or lesson, 3 its letters appear in order in the name
    (``pgsl`` finds pg-skip-locked)."""
    q = " ".join(query.lower().split())
    if not q:
        return 0
    name, title, lesson = sc.name.lower(), (sc.title or "").lower(), " ".join((sc.lesson or "").lower().split())
    words = q.split()
    if q in name:
        return 0
    if all(w in name or w in title for w in words):
        return 1
    if all(w in name or w in title or w in lesson for w in words):
        return 2
    if is_subsequence(q.replace(" ", ""), name):
        return 3
    return None


def ordered(scenarios: list[Scenario], engine: str, query: str = "") -> list[Scenario]:
    """The scenarios matching ``query``, best match first; the current engine's before the other's."""
    ranked = []
    for i, sc in enumerate(scenarios):
        rank = match_rank(sc, query)
        if rank is not None:
            # among name matches the tightest first: "skip" puts pg-skip-locked before its longer sibling
            tight = len(sc.name) if query.strip() and rank in (0, 3) else 0
            ranked.append(((rank, not sc.runs_on(engine), tight, i), sc))
    return [sc for _, sc in sorted(ranked, key=lambda item: item[0])]


class ScenarioPicker(ModalScreen[Scenario | None]):
    """Type to filter (name, title, lesson), Up/Down to move, Enter loads, Esc closes."""

    BINDINGS = [
        Binding("escape", "dismiss(None)", "Close"),
        Binding("f9", "dismiss(None)", "Close", show=False),
        Binding("up", "move(-1)", "Previous", show=False),
        Binding("down", "move(1)", "Next", show=False),
    ]

    def __init__(self, scenarios: list[Scenario], engine: str, path_first: bool = False):
        super().__init__()
        self.scenarios = scenarios
        self.engine = engine
        self.path_first = path_first
        self.shown: list[Scenario] = ordered(scenarios, engine)

    def compose(self) -> ComposeResult:
        with Vertical(id="picker"):
            yield Label("Load a scenario  (type to filter, ↑↓ move, Enter loads, Esc closes; "
                        "↔ = written for the other engine: loading it switches)", id="picker-title")
            yield Input(placeholder="filter: name, title or lesson words (e.g. skip, nowait, deadlock)",
                        id="picker-filter")
            with Horizontal():
                width = max((len(sc.name) for sc in self.scenarios), default=10) + 2
                self._width = width
                self.compact = self.app.size.width < 120
                picker_list = OptionList(*self._options(), id="picker-list")
                picker_list.styles.width = width + (4 if self.compact else 9 + 8)
                yield picker_list
                with VerticalScroll(id="picker-detail-box"):
                    yield Static(id="picker-detail")
            yield Label("", id="picker-path-note")
            yield Input(placeholder="or open a file: path to a .race scenario or an isolation .spec, then Enter",
                        id="picker-path")

    def _options(self) -> list[Option]:
        options = []
        for sc in self.shown:
            mark = "" if sc.runs_on(self.engine) else " ↔"
            if self.compact:  # a narrow terminal: the name and the mark (the lesson pane says the engines)
                label = Text.assemble((sc.name, "bold"), (mark, themed("$lr-accent")))
            else:
                label = Text.assemble((f"{sc.name:<{self._width}}", "bold"), (f"{','.join(sc.engines):<9}", themed("$lr-muted")),
                                      (mark, themed("$lr-accent")))
            options.append(Option(label, id=sc.name))
        return options

    def on_mount(self) -> None:
        lst = self.query_one(OptionList)
        if self.shown:
            lst.highlighted = 0
        self.query_one("#picker-filter", Input).focus()
        if self.path_first or not self.scenarios:
            self.focus_path()

    def focus_path(self) -> None:
        self.query_one("#picker-path", Input).focus()

    @property
    def highlighted(self) -> Scenario | None:
        lst = self.query_one(OptionList)
        if lst.highlighted is None or not self.shown:
            return None
        return self.shown[lst.highlighted]

    def action_move(self, delta: int) -> None:
        lst = self.query_one(OptionList)
        if not self.shown:
            return
        current = lst.highlighted if lst.highlighted is not None else -delta
        lst.highlighted = max(0, min(len(self.shown) - 1, current + delta))

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id != "picker-filter":
            return
        event.stop()
        self.shown = ordered(self.scenarios, self.engine, event.value)
        lst = self.query_one(OptionList)
        lst.clear_options()
        lst.add_options(self._options())
        detail = self.query_one("#picker-detail", Static)
        if self.shown:
            lst.highlighted = 0
            detail.update(describe(self.shown[0]))
        else:
            detail.update(Text(f"No scenario matches {event.value.strip()!r}.", style=themed("$lr-muted")))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if event.input.id == "picker-filter":
            if self.highlighted is not None:
                self.dismiss(self.highlighted)
            return
        path = event.value.strip()
        if not path:
            return
        note = self.query_one("#picker-path-note", Label)
        try:
            scenario = resolve(str(Path(path).expanduser()))
        except ScenarioError as exc:
            note.update(Text(f"✗ {exc}", style=themed("bold $lr-failure")))
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
