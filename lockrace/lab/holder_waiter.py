"""Holder vs waiter: session H keeps row 1 locked for hold_ms while session W
asks for it in one mode; only W's statement is timed, by the engine, around
the driver call (StatementResult.elapsed_ns).

One run: W opens its transaction (and sets a per-transaction budget), H locks
row 1, W sends the timed statement at once; H commits on its own connection
when the hold is over (or as soon as W has its answer, when W did not wait for
the row); then W rolls back.  Runs never overlap.  Warm-up runs come first and
are not counted.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from time import perf_counter_ns
from typing import Callable

from ..backends.base import Backend
from ..core.events import Budget, StatementResult
from ..core.outcome import Outcome
from ..dialects import family_dialect
from ..engine.race import Race
from .modes import HOLD_SQL, TABLE, LabConfig, LabError, Mode
from .stats import Summary, summarize

ERROR_OUTCOMES = (Outcome.REFUSED, Outcome.TIMED_OUT, Outcome.DEADLOCK, Outcome.STATEMENT_TIMEOUT, Outcome.ERROR,
                  Outcome.CANCELLED, Outcome.CONNECTION_LOST)


@dataclass(frozen=True)
class Sample:
    mode: str
    index: int  # 1-based; warm-up runs are not samples
    wait_ms: float
    outcome: str
    code: str = ""
    row: str | None = None  # the id the waiter got, if any
    budget: Budget | None = None

    @property
    def error(self) -> bool:
        return self.outcome in ERROR_OUTCOMES


@dataclass
class ModeResult:
    mode: Mode
    samples: list[Sample] = field(default_factory=list)
    applied_budget_ms: float | None = None  # what the engine read back / the statement asked, see budget_note
    budget_note: str = ""
    problems: list[str] = field(default_factory=list)  # runs that did not do what the mode must do

    @property
    def summary(self) -> Summary:
        return summarize([s.wait_ms for s in self.samples], sum(1 for s in self.samples if s.error))

    @property
    def waits_ms(self) -> list[float]:
        return [s.wait_ms for s in self.samples]


@dataclass
class LabResult:
    config: LabConfig
    engine: str
    flavor: str
    server_name: str
    server_version: str
    modes: dict[str, ModeResult] = field(default_factory=dict)

    def ratio(self) -> tuple[str, float] | None:
        """default / bounded median (e.g. 3.9x)."""
        default = self.modes.get("default")
        bounded = self.modes.get("timeout") or self.modes.get("wait")
        if default is None or bounded is None or not bounded.samples or bounded.summary.median_ms <= 0:
            return None
        return bounded.mode.label, default.summary.median_ms / bounded.summary.median_ms


Progress = Callable[[Mode, "Sample | None", int, int], None]
"""progress(mode, sample or None for a warm-up run, runs done overall, runs overall)"""


def setup_sql(engine: str) -> list[str]:
    kind = "INT PRIMARY KEY, note VARCHAR(20)"
    tail = family_dialect(engine).table_options
    return [
        f"DROP TABLE IF EXISTS {TABLE}",
        f"CREATE TABLE {TABLE} (id {kind}){tail}",
        f"INSERT INTO {TABLE} VALUES (1, 'head'), (2, 'next'), (3, 'spare')",
    ]


class HolderWaiterLab:
    def __init__(self, backend: Backend, config: LabConfig, progress: Progress | None = None):
        self.backend = backend
        self.config = config
        self.progress = progress
        self.race: Race | None = None
        self._done = 0

    @property
    def total_runs(self) -> int:
        return len(self.config.plan) * (self.config.runs + self.config.warmup)

    async def run(self) -> LabResult:
        cfg = self.config
        await self.backend.run_admin(setup_sql(cfg.engine))
        result = LabResult(cfg, self.backend.family, self.backend.flavor, self.backend.server_name, self.backend.version)
        self.race = race = await Race(self.backend, ["H", "W"]).open()
        try:
            for mode in cfg.plan:
                result.modes[mode.key] = await self._run_mode(mode)
        finally:
            await race.close()
            with contextlib.suppress(Exception):
                await self.backend.run_admin([f"DROP TABLE IF EXISTS {TABLE}"])
        return result

    async def _must(self, name: str, sql: str) -> StatementResult:
        assert self.race is not None
        res = await self.race.run(name, sql)
        if res.failed:
            raise LabError(f"session {name}: {sql}: {res.code} {res.message}".replace("  ", " "))
        return res

    async def _run_mode(self, mode: Mode) -> ModeResult:
        cfg = self.config
        out = ModeResult(mode)
        for sql in mode.session_setup:
            await self._must("W", sql)
        try:
            for i in range(cfg.warmup + cfg.runs):
                sample = await self._one_run(mode, i - cfg.warmup + 1)
                if i == 0:
                    self._check_budget(mode, sample, out)
                counted = i >= cfg.warmup
                if counted:
                    out.samples.append(sample)
                    problem = self._problem(mode, sample)
                    if problem:
                        out.problems.append(problem)
                self._done += 1
                if self.progress is not None:
                    self.progress(mode, sample if counted else None, self._done, self.total_runs)
        finally:
            for sql in mode.session_reset:
                with contextlib.suppress(LabError):
                    await self._must("W", sql)
        if mode.key == "wait" and out.samples:
            self._note_wait_budget(mode, out)
        return out

    async def _one_run(self, mode: Mode, index: int) -> Sample:
        race = self.race
        assert race is not None
        hold_ns = self.config.hold_ms * 1_000_000
        await self._must("W", "BEGIN")
        for sql in mode.prepare:
            await self._must("W", sql)
        await self._must("H", "BEGIN")
        await self._must("H", HOLD_SQL)
        granted = perf_counter_ns()
        release_now = asyncio.Event()
        holder = asyncio.create_task(self._release(granted + hold_ns, release_now))
        try:
            res = await race.run("W", mode.sql)
        finally:
            # W has its answer: if it did not wait for the row, H need not hold on
            release_now.set()
            await holder
        await self._must("W", "ROLLBACK")
        row = res.rows[0][0] if res.rows and res.rows[0] else None
        return Sample(mode.key, index, res.elapsed_ns / 1e6, res.outcome, res.code, row, res.budget)

    async def _release(self, at_ns: int, now: asyncio.Event) -> None:
        delay = max(0.0, (at_ns - perf_counter_ns()) / 1e9)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(now.wait(), delay)
        await self._must("H", "COMMIT")

    def _check_budget(self, mode: Mode, sample: Sample, out: ModeResult) -> None:
        """The budget the engine read back from the server for the timed statement."""
        if mode.key != "timeout":
            return  # WAIT n: what the server applied shows only in the waits (_note_wait_budget)
        if sample.budget is not None:
            out.applied_budget_ms = sample.budget.ms
        if out.applied_budget_ms is not None and out.applied_budget_ms >= self.config.hold_ms:
            raise LabError(
                f"{mode.label}: the server applied a {out.applied_budget_ms:g} ms budget, not shorter than the"
                f" {self.config.hold_ms} ms hold; raise --hold-ms"
            )

    def _note_wait_budget(self, mode: Mode, out: ModeResult) -> None:
        """WAIT n: say what the server did with n, from what was measured."""
        asked = mode.budget_ms or 0
        median = out.summary.median_ms
        observed_s = round(median / 1000)
        out.budget_note = (
            f"{mode.label}: asked {asked / 1000:g} s; the waits (median {median:.1f} ms) show the server applied"
            f" {observed_s} s" + (" - it behaves as WAIT 0 / NOWAIT" if observed_s == 0 else "")
        )
        engine_budget = out.samples[0].budget
        if engine_budget is not None:
            out.budget_note += f" (lockrace's budget for the statement: {engine_budget.name}, {engine_budget.ms:g} ms)"
        out.applied_budget_ms = observed_s * 1000.0

    @staticmethod
    def _problem(mode: Mode, s: Sample) -> str:
        if mode.expect == "error" and not s.error:
            return f"run {s.index}: {mode.label} got the row ({s.outcome}) instead of an error"
        if mode.expect == "wait" and (s.error or s.row != "1"):
            return f"run {s.index}: {mode.label} ended {s.outcome} {s.code} instead of getting row 1".replace("  ", " ")
        if mode.expect == "claim" and (s.error or s.row != "2"):
            return f"run {s.index}: {mode.label} got row {s.row} ({s.outcome}) instead of the next free row 2"
        return ""

