"""Step through a loaded scenario with the engine's own ScenarioRunner.

The runner's ``step`` does the real work (launch, wait for the server to
report a blocking step waiting, collect blocked steps that finished); this
class only keeps the position and says what comes next.
"""

from __future__ import annotations

from typing import Callable

from ..engine.race import Race
from ..engine.runner import Entry, ScenarioRunner
from ..scenario.model import Scenario, Step


class Player:
    def __init__(self, race: Race, scenario: Scenario, on_entry: Callable[[Entry], None], step_timeout: float = 15.0):
        self.race = race
        self.scenario = scenario
        self.runner = ScenarioRunner(race, scenario, step_timeout=step_timeout, on_entry=on_entry)
        self.order = [entry.step for entry in scenario.order()[0]]
        self.position = 0  # steps launched so far
        self.busy = False
        self.finished = False
        self.current: Step | None = None  # the step being run
        self._listening = False

    @property
    def total(self) -> int:
        return len(self.order)

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
            self.position += 1
            self.current = step
            await self.runner.step(step, self.position)
            if self.position >= self.total:
                await self.runner._drain_pending(final=True)
                self.finished = True
        finally:
            self.busy = False
        return True
