"""What the user did, kept so it can be saved: a .race scenario built from
the statements typed (or stepped) so far, and its transcript, written by the
same writer as ``lockrace run`` (so running the saved .race prints the same)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core.events import Event, StatementBlocked, StatementFinished, StatementResult, StatementStarted
from ..render.transcript import Blocked, Observed, replay, run_text
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
    blocks: list[Blocked] = field(default_factory=list)  # each report of it waiting


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
        elif isinstance(event, StatementBlocked):
            for p in reversed(self.played):
                if p.stmt_id == event.stmt_id and p.result is None:
                    p.blocks.append(Blocked(event.t_ns, len(self.played), event.blockers, event.lock))
                    break
        elif isinstance(event, StatementFinished):
            for p in reversed(self.played):
                if p.stmt_id == event.stmt_id:
                    p.result = event.result
                    p.finished_after = len(self.played)
                    break

    @property
    def unfinished(self) -> list[Played]:
        """Statements still running: neither saved nor in the transcript (their end is unknown)."""
        return [p for p in self.played if p.result is None]

    def finished(self) -> list[Played]:
        """The finished statements, renumbered 1..N in launch order (counts of statements
        started count these only)."""
        kept = [p for p in self.played if p.result is not None]
        launched = [p.launched_index for p in kept]

        def renumber(n: int) -> int:
            return sum(1 for i in launched if i <= n)

        return [Played(p.session, p.sql, p.stmt_id, i, p.result, renumber(p.finished_after),
                       [Blocked(b.t_ns, renumber(b.launched), b.blockers, b.lock) for b in p.blocks])
                for i, p in enumerate(kept, start=1)]

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
            played = {p.session for p in self.finished()}
            sc.nodes = {s: n for s, n in base.nodes.items() if s in played}
        for p in self.finished():
            step = Step(name=str(p.launched_index), session=p.session, sql=p.sql)
            step.expectations = expectations_for(p, self.flavor)
            sc.steps.append(step)
        for n in sc.session_names():
            sc.session(n)
        return sc

    def race_text(self, name: str) -> str:
        return write_scenario(self.scenario(name))

    def transcript_text(self, name: str, server: str, origin: str) -> str:
        """Exactly what ``lockrace run`` prints for the saved race, from what was seen here."""
        sc = self.scenario(name)
        observed = [Observed(p.result, p.finished_after, p.blocks) for p in self.finished()]
        entries, report = replay(sc, observed, self.flavor, server)
        return run_text(sc, entries, report, self.flavor, origin)


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
        # it was still waiting when later statements started: a replay must let them run
        # (a deadlock victim, or a wait that timed out, ends only after them too)
        if p.finished_after > p.launched_index:
            out.append(Expectation("completes_after", p.finished_after))
    if res.has_rows and not res.result_sets:
        out.append(Expectation("rows", res.total_rows))
    if res.skipped_rows:
        out.append(Expectation("skipped", res.skipped_rows))
    return out
