"""Run a scenario's steps on a Race, in order, and verify expectations.

Semantics (also in the README):

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

import asyncio
from dataclasses import dataclass, field
from time import perf_counter_ns
from typing import Callable

from ..scenario.model import Scenario, Step
from .events import LockInfo, ServerNote, StatementBlocked, StatementFinished
from .race import Race
from .verify import StepRecord, check, check_across


@dataclass
class Entry:
    """One line-worthy moment of a run, for transcript writers."""

    kind: str  # note | launch | blocked | finish | problem
    record: StepRecord | None = None
    text: str = ""
    blockers: tuple[str, ...] = ()
    lock: LockInfo | None = None


@dataclass
class RunReport:
    scenario: Scenario
    flavor: str
    server: str
    records: list[StepRecord] = field(default_factory=list)
    setup_error: str = ""
    wall_ns: int = 0
    problems: list[str] = field(default_factory=list)  # run-level: sessions the server closed, ...

    @property
    def failures(self) -> list[str]:
        out = [self.setup_error] if self.setup_error else []
        for rec in self.records:
            out.extend(rec.failures)
        out.extend(self.problems)
        return out

    @property
    def passed(self) -> bool:
        return not self.failures


class ScenarioRunner:
    def __init__(self, race: Race, scenario: Scenario, *, step_timeout: float = 10.0,
                 on_entry: Callable[[Entry], None] | None = None):
        self.race = race
        self.flavor = race.backend.flavor
        self.scenario = scenario.for_flavor(self.flavor)  # per-engine SQL: this server's variant
        self.step_timeout = step_timeout
        self.on_entry = on_entry or (lambda entry: None)
        self.launched = 0
        self.finished_after: dict[int, int] = {}
        self.pending: dict[str, tuple[StepRecord, object]] = {}
        self.report = RunReport(self.scenario, self.flavor, race.backend.server_name)

    async def prepare(self) -> None:
        """Fresh sandbox, global setup, then each session's own setup (each
        statement bounded by the step timeout, like a step)."""
        await self.race.backend.reset_sandbox()
        await self.race.backend.run_admin(self.scenario.setup_for(self.flavor))
        for sdef in self.scenario.sessions:
            for sql in sdef.setup:
                await self._run_own(sdef.name, sql)

    async def teardown(self) -> None:
        """Sessions' teardown, then cancel what still runs, roll back what the
        sessions left open or prepared, then the scenario's teardown: every
        statement bounded by the step timeout."""
        for sdef in self.scenario.sessions:
            if sdef.name in self.race.sessions and not self.race.sessions[sdef.name].busy:
                for sql in sdef.teardown:
                    await self._run_own(sdef.name, sql)
        for name, session in self.race.sessions.items():
            if session.busy:
                await self.race.cancel(name)
                if session.running:
                    await asyncio.wait_for(asyncio.shield(session.running.done.wait()), 5)
        left = await self.race.release_prepared(min(self.step_timeout, 5.0))
        if left:
            raise RuntimeError(f"could not roll back prepared transaction {', '.join(left)}")
        for name, session in self.race.sessions.items():
            if session.txn != "idle" and not session.conn.closed:
                await self._run_own(name, "ROLLBACK")
        await self.race.backend.run_admin(self.scenario.teardown_for(self.flavor))

    async def _run_own(self, name: str, sql: str):
        """A statement the runner issues itself (session setup/teardown, ROLLBACK):
        cancelled through the monitor if it outlives the step timeout."""
        if name not in self.race.sessions:
            await self.race.add_session(name)
        stmt = self.race.submit(name, sql)
        try:
            await asyncio.wait_for(asyncio.shield(stmt.done.wait()), self.step_timeout)
        except asyncio.TimeoutError:
            await self.race.cancel(name)
            await asyncio.wait_for(asyncio.shield(stmt.done.wait()), 5)
            raise RuntimeError(f"{name}> {sql.strip()} did not finish within {self.step_timeout:g} s; cancelled") from None
        return stmt.result

    async def run(self, prepare: bool = True) -> RunReport:
        t0 = perf_counter_ns()
        listener = self._on_event
        self.race.subscribe(listener)
        try:
            if prepare:
                try:
                    await self.prepare()
                except Exception as exc:
                    self.report.setup_error = f"setup failed: {str(exc).strip().splitlines()[0] if str(exc).strip() else exc}"
                    return self.report
            for index, entry in enumerate(self.scenario.order()[0], start=1):
                await self.step(self.scenario.step(entry.step), index)
            await self._drain_pending(final=True)
            self.report.problems.extend(check_across(self.scenario.across, self.report.records, self.flavor))
            self._check_closed_sessions()
        finally:
            self.race.unsubscribe(listener)
            self.report.wall_ns = perf_counter_ns() - t0
        return self.report

    def _check_closed_sessions(self) -> None:
        """Sessions whose connection the server closed fail the run, unless the
        scenario expects that session to lose its connection."""
        # a hot standby ends an idle-in-transaction session's connection on a recovery
        # conflict ("terminating connection due to conflict with recovery")
        expecting = {rec.step.session for rec in self.report.records
                     if any(e.key == "outcome" and e.value in ("connection_lost", "recovery_conflict")
                            for e in rec.step.applicable(self.flavor))}
        lost_steps = {rec.step.session for rec in self.report.records
                      if rec.result is not None and rec.result.outcome == "connection_lost"}
        closed = [name for name, s in self.race.sessions.items()
                  if (s.txn == "closed" or s.conn.closed) and name not in expecting and name not in lost_steps]
        if closed:
            self.report.problems.append(
                f"the server closed the connection of session{'s' if len(closed) > 1 else ''} {', '.join(closed)}")

    # ---------------------------------------------------------------- steps
    def _on_event(self, event) -> None:
        if isinstance(event, StatementFinished):
            # "completes after step N" is judged at the moment the server answered,
            # not when the runner got round to collecting the step
            self.finished_after[event.stmt_id] = self.launched
        if isinstance(event, ServerNote) and event.node and event.session:
            # cluster races: what a node says about a session's statement (a hot
            # standby: "replay on the standby waits for C ...") goes into the transcript
            self.on_entry(Entry("note", text=f"{event.session}@{event.node}: {event.text}"))
        if isinstance(event, StatementBlocked):
            for record, stmt in self.pending.values():
                if getattr(stmt, "stmt_id", None) == event.stmt_id:
                    record.was_blocked = True
                    record.blockers = event.blockers
                    self.on_entry(Entry("blocked", record, blockers=event.blockers, lock=event.lock))

    async def step(self, step: Step, index: int) -> StepRecord:
        record, stmt = await self._launch(step, index)
        if stmt is None:
            return record
        if step.expects_blocking(self.flavor):
            if not await self.race.wait_blocked_or_done(stmt, self.step_timeout):
                record.problem = f"was expected to block but the server never reported it waiting within {self.step_timeout:g} s"
        else:
            await self._await_done(record, stmt)
        await self._drain_pending(final=False)
        return record

    async def _launch(self, step: Step, index: int) -> tuple[StepRecord, object | None]:
        """Narrate, then start ``step`` in its session; no statement if the session is busy."""
        if step.note:
            self.on_entry(Entry("note", text=step.note))
        record = StepRecord(step, index)
        self.report.records.append(record)
        session = self.race.sessions.get(step.session)
        if session is None:
            session = await self.race.add_session(step.session)
        if session.busy:
            record.problem = f"session {step.session} is still busy with an earlier statement"
            record.failures = check(record, step.applicable(self.flavor))
            self.on_entry(Entry("problem", record, text=record.problem))
            return record, None
        stmt = self.race.submit(step.session, step.sql_for(self.flavor) or step.sql)  # per-engine SQL
        self.launched = index
        self.pending[step.name] = (record, stmt)
        self.on_entry(Entry("launch", record))
        return record, stmt

    async def _await_done(self, record: StepRecord, stmt) -> None:
        try:
            await asyncio.wait_for(asyncio.shield(stmt.done.wait()), self.step_timeout)
        except asyncio.TimeoutError:
            who = f" (blocked by {', '.join(stmt.blockers)})" if stmt.blockers else ""
            record.problem = f"did not finish within {self.step_timeout:g} s{who}; cancelled"
            await self.race.cancel(record.step.session)
            try:
                await asyncio.wait_for(asyncio.shield(stmt.done.wait()), 5)
            except asyncio.TimeoutError:
                record.problem += " (the cancel did not take)"
                return
        self._complete(record, stmt)

    def _complete(self, record: StepRecord, stmt) -> None:
        self.pending.pop(record.step.name, None)
        record.result = stmt.result
        record.launched_before_finish = self.finished_after.get(stmt.stmt_id, self.launched)
        record.was_blocked = record.was_blocked or stmt.ever_blocked
        record.blockers = stmt.blockers or record.blockers
        session = self.race.sessions.get(record.step.session)
        record.txn_after = session.txn if session else ""
        record.failures = check(record, record.step.applicable(self.flavor))
        self.on_entry(Entry("finish", record))

    async def _drain_pending(self, final: bool) -> None:
        """Collect blocked steps that finished or are due to finish now."""
        if not self.pending:
            return
        # steps that already finished while others ran
        for record, stmt in list(self.pending.values()):
            if stmt.done.is_set():
                self._complete(record, stmt)
        due = []
        for record, stmt in list(self.pending.values()):
            after = [e.value for e in record.step.applicable(self.flavor) if e.key == "completes_after"]
            if final or (after and self.launched >= after[0]):
                due.append((record, stmt))
        for record, stmt in due:
            await self._await_done(record, stmt)
        if self.pending and not final:
            # ask the server afresh: a step it no longer reports blocked is about to finish
            try:
                await self.race.poll_waits()
            except Exception:
                return
            for record, stmt in list(self.pending.values()):
                if stmt.blocked_since is None:
                    await self._await_done(record, stmt)
