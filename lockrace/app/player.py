"""Step through a loaded scenario with the engine's scheduler.

``engine.scheduler.Scheduler.step`` does the real work (launch, wait as the
step's policy says, collect steps that finished); this class only keeps the
position in the chosen permutation (a lockrace scenario has one; an isolation
spec may have many) and says what comes next.  Isolation specs carry no
expectations, so the scheduler steps them by isolationtester's rules.
"""

from __future__ import annotations

from typing import Callable

from ..engine.race import Race
from ..engine.scheduler import Entry, Scheduler
from ..scenario.model import PermutationEntry, Scenario, ScenarioKind, Step


def permutation_text(perm: list[PermutationEntry]) -> str:
    """A permutation as the spec writes it: ``s1a s2a(*) s1b``."""
    out = []
    for entry in perm:
        marks = []
        for b in entry.blockers:
            if b.step is None:
                marks.append("*")
            else:
                marks.append(b.step + (f" notices {b.notices}" if b.notices is not None else ""))
        out.append(entry.step + (f"({', '.join(marks)})" if marks else ""))
    return " ".join(out)


class Player:
    def __init__(self, race: Race, scenario: Scenario, on_entry: Callable[[Entry], None],
                 step_timeout: float = 15.0, permutation: int = 0):
        self.race = race
        self.scenario = scenario
        self.is_spec = scenario.kind == ScenarioKind.ISOLATION_SPEC
        self.scheduler = Scheduler(race, scenario, step_timeout=step_timeout, on_entry=on_entry)
        perms = scenario.order()
        self.permutation = permutation if 0 <= permutation < len(perms) else 0
        self.entries: list[PermutationEntry] = list(perms[self.permutation])
        self.order = [entry.step for entry in self.entries]
        self.position = 0  # steps launched so far
        self.busy = False
        self.finished = False
        self.current: Step | None = None  # the step being run

    @property
    def total(self) -> int:
        return len(self.order)

    @property
    def permutations(self) -> int:
        return len(self.scenario.order())

    @property
    def next_step(self) -> Step | None:
        if self.position >= self.total:
            return None
        return self.scenario.step(self.order[self.position])

    @property
    def records(self):
        return self.scheduler.report.records

    def met(self) -> tuple[int, int]:
        """(steps whose expectations all held, steps with a failure), among completed steps."""
        done = [r for r in self.records if r.result is not None or r.problem]
        bad = sum(1 for r in done if r.failures)
        return len(done) - bad, bad

    async def prepare(self) -> None:
        self.scheduler.attach()  # the scheduler records which pending step the server reports blocked
        await self.scheduler.prepare()

    def detach(self) -> None:
        self.scheduler.detach()

    async def step(self) -> bool:
        """Run the next step; False when there is none (or one is still in progress)."""
        step = self.next_step
        if step is None or self.busy:
            return False
        self.busy = True
        try:
            entry = self.entries[self.position]
            self.position += 1
            self.current = step
            await self.scheduler.step(step, self.position, entry)
            if self.position >= self.total:
                await self.scheduler.finish()
                self.finished = True
        finally:
            self.busy = False
        return True
