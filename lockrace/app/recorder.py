"""What the user did, kept so it can be saved: a .race scenario built from
the statements typed (or stepped) so far, and a plain-text transcript."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..engine.events import Event, StatementFinished, StatementResult, StatementStarted
from ..scenario.model import Expectation, Scenario, Step
from ..scenario.text_format import write_scenario


@dataclass
class Played:
    session: str
    sql: str
    stmt_id: int
    launched_index: int  # 1-based position among all statements started
    result: StatementResult | None = None
    finished_after: int = 0  # how many statements had started when it finished


@dataclass
class Recorder:
    engine: str
    flavor: str
    played: list[Played] = field(default_factory=list)
    base: Scenario | None = None  # the scenario loaded, whose setup the race starts from

    def clear(self, engine: str, flavor: str, base: Scenario | None = None) -> None:
        self.engine, self.flavor, self.base = engine, flavor, base
        self.played.clear()

    def apply(self, event: Event) -> None:
        if isinstance(event, StatementStarted):
            self.played.append(Played(event.session, event.sql, event.stmt_id, len(self.played) + 1))
        elif isinstance(event, StatementFinished):
            for p in reversed(self.played):
                if p.stmt_id == event.stmt_id:
                    p.result = event.result
                    p.finished_after = len(self.played)
                    break

    def scenario(self, name: str) -> Scenario:
        """The race so far as a runnable scenario whose expectations record what happened."""
        base = self.base
        sc = Scenario(
            name=name,
            title=f"Recorded race{f' (from {base.name})' if base else ''}",
            engines=[self.engine],
            lesson=base.lesson if base else "",
            source=f"recorded in the lockrace app on {self.flavor}",
        )
        if base is not None:
            sc.setup = {k: list(v) for k, v in base.setup.items()}
            sc.teardown = {k: list(v) for k, v in base.teardown.items()}
        for p in self.played:
            step = Step(name=str(p.launched_index), session=p.session, sql=p.sql)
            step.expectations = expectations_for(p, self.flavor)
            sc.steps.append(step)
        for n in sc.session_names():
            sc.session(n)
        return sc

    def race_text(self, name: str) -> str:
        return write_scenario(self.scenario(name))


def expectations_for(p: Played, flavor: str) -> list[Expectation]:
    res = p.result
    if res is None:
        return []
    out = [Expectation("outcome", res.outcome)]
    if res.code:
        out.append(Expectation("code", res.code))
    names = [b for b in res.blocked_by if b.isidentifier() and " " not in b]
    if names:
        out.append(Expectation("blocked_by", ", ".join(names)))
        if res.outcome in ("ok", "skipped") and p.finished_after > p.launched_index:
            out.append(Expectation("completes_after", p.finished_after))
    if res.has_rows and not res.result_sets:
        out.append(Expectation("rows", res.total_rows))
    if res.skipped_rows:
        out.append(Expectation("skipped", res.skipped_rows))
    return out
