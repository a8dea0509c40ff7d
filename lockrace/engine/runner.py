"""Run a whole scenario (its first permutation) on a Race and verify its
expectations: ``lockrace run``.  Each step goes through the engine's one
scheduler (``engine/scheduler.py``), the same one the app steps with.

Semantics (also in docs/race-format.md):

* Each step is launched in its session.  The runner waits until it finishes,
  unless the step expects to block (``blocked-by`` or ``completes-after``):
  then it waits until the *server* reports it blocked and moves on.
* After a step finishes, a blocked step whose ``completes-after`` names it
  must finish too; the runner waits for it.  Other blocked steps that the
  server no longer reports blocked are waited for as well.
* A step that runs longer than ``step_timeout`` is cancelled through the
  monitor connection and reported as a failure, naming who blocked it.
"""

from __future__ import annotations

from time import perf_counter_ns

from .scheduler import RunReport, Scheduler


class ScenarioRunner(Scheduler):
    async def run(self, prepare: bool = True) -> RunReport:
        t0 = perf_counter_ns()
        self.attach()
        try:
            if prepare:
                try:
                    await self.prepare()
                except Exception as exc:
                    text = str(exc).strip()
                    self.report.setup_error = f"setup failed: {text.splitlines()[0] if text else exc}"
                    return self.report
            for index, entry in enumerate(self.scenario.order()[0], start=1):
                await self.step(self.scenario.step(entry.step), index, entry)
            await self.finish()
            self.check_closed_sessions()
        finally:
            self.detach()
            self.report.wall_ns = perf_counter_ns() - t0
        return self.report
