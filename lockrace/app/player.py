"""Step through a loaded scenario with the engine's own ScenarioRunner.

The runner's ``step`` does the real work (launch, wait for the server to
report a blocking step waiting, collect blocked steps that finished); this
class only keeps the position in the chosen permutation (a lockrace scenario
has one; an isolation spec may have many) and says what comes next.

Isolation specs carry no expectations, so their steps follow
isolationtester's rule instead (``SpecStepRunner``): launch a step, then wait
until it finishes or the server reports it waiting, and move on.
"""

from __future__ import annotations

import asyncio
from typing import Callable

from ..engine.race import Race
from ..engine.runner import Entry, ScenarioRunner
from ..engine.verify import StepRecord
from ..scenario.model import PermutationEntry, Scenario, Step


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


class SpecStepRunner(ScenarioRunner):
    """isolationtester's schedule for one step at a time, on the app's Race."""

    async def step(self, step: Step, index: int, entry: PermutationEntry | None = None) -> StepRecord:
        # like isolationtester: a session's earlier step must complete before its next one is sent
        for record, stmt in list(self.pending.values()):
            if record.step.session == step.session:
                await self._await_done(record, stmt)
        record, stmt = await self._launch(step, index)
        if stmt is None:
            return record
        if entry is not None and any(b.step is None for b in entry.blockers):
            pass  # "(*)": the spec says this step waits; move on at once
        else:
            waits = [asyncio.ensure_future(stmt.done.wait()), asyncio.ensure_future(stmt.blocked.wait())]
            try:
                await asyncio.wait(waits, timeout=self.step_timeout, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waits:
                    w.cancel()
            if stmt.done.is_set() or not stmt.blocked.is_set():
                await self._await_done(record, stmt)  # done, or neither done nor waiting: cancelled
        await self._drain_pending(final=False)
        return record


class Player:
    def __init__(self, race: Race, scenario: Scenario, on_entry: Callable[[Entry], None],
                 step_timeout: float = 15.0, permutation: int = 0):
        self.race = race
        self.scenario = scenario
        self.is_spec = scenario.kind == "isolation-spec"
        runner = SpecStepRunner if self.is_spec else ScenarioRunner
        self.runner = runner(race, scenario, step_timeout=step_timeout, on_entry=on_entry)
        perms = scenario.order()
        self.permutation = permutation if 0 <= permutation < len(perms) else 0
        self.entries: list[PermutationEntry] = list(perms[self.permutation])
        self.order = [entry.step for entry in self.entries]
        self.position = 0  # steps launched so far
        self.busy = False
        self.finished = False
        self.current: Step | None = None  # the step being run
        self._listening = False

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
        return self.runner.report.records

    def met(self) -> tuple[int, int]:
        """(steps whose expectations all held, steps with a failure), among completed steps."""
        done = [r for r in self.records if r.result is not None or r.problem]
        bad = sum(1 for r in done if r.failures)
        return len(done) - bad, bad

    async def prepare(self) -> None:
        if not self._listening:
            # the runner's own listener records which pending step the server reports blocked
            self.race.subscribe(self.runner._on_event)
            self._listening = True
        await self.runner.prepare()

    def detach(self) -> None:
        if self._listening:
            self.race.unsubscribe(self.runner._on_event)
            self._listening = False

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
            if self.is_spec:
                await self.runner.step(step, self.position, entry)
            else:
                await self.runner.step(step, self.position)
            if self.position >= self.total:
                await self.runner._drain_pending(final=True)
                self.finished = True
        finally:
            self.busy = False
        return True
