"""One steppable scheduler for every way a race is run.

``lockrace run`` (ScenarioRunner, all steps of a permutation in one go), the
app (one step per F5) and anything else that runs a scenario's steps on a
Race call the same ``Scheduler.step``.  What a step waits for before the next
one is launched is a policy, as in PostgreSQL's isolationtester
(``try_complete_step`` with or without ``STEP_NONBLOCK``):

* ``Wait.UNTIL_DONE``: wait until the statement finishes (a scenario step that
  expects no wait); past ``step_timeout`` it is cancelled through the monitor
  connection and reported as a failure, naming who blocked it.
* ``Wait.UNTIL_WAITING``: the step expects to block (``blocked-by`` or
  ``completes-after``): wait until the *server* reports it waiting (or it
  finishes), then move on; never reported waiting is a failure.
* ``Wait.DONE_OR_WAITING``: isolationtester's rule for a spec step: wait until
  it finishes or the server says it waits, whichever comes first; neither
  within ``step_timeout``: cancelled like ``UNTIL_DONE``.
* ``Wait.MOVE_ON``: the permutation marks the step waiting (``(*)``): launch
  it and move on at once.

After every step, steps launched earlier that finished meanwhile are
collected; a blocked step whose ``completes-after`` names the step just run
is waited for, and so is one the server no longer reports blocked.  Under
isolationtester's rules (``spec_rules``) a session's earlier step must finish
before its next one is sent; under lockrace's, a step sent to a busy session
is reported as a problem instead.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from enum import Enum, StrEnum
from typing import Callable

from ..scenario.model import PermutationEntry, Scenario, ScenarioKind, Step
from ..core.events import LockInfo, ServerNote, StatementBlocked, StatementFinished
from .race import Race
from .session import RunningStatement
from .verify import StepRecord, check, check_across


class Wait(Enum):
    UNTIL_DONE = "until done"
    UNTIL_WAITING = "until the server reports it waiting"
    DONE_OR_WAITING = "until done or the server reports it waiting"
    MOVE_ON = "not at all (marked waiting)"


def marked_waiting(entry: PermutationEntry | None) -> bool:
    """The permutation marks this step waiting whatever happens: ``step(*)``."""
    return entry is not None and any(b.step is None for b in entry.blockers)


def wait_policy(step: Step, flavor: str, *, spec_rules: bool, entry: PermutationEntry | None = None) -> Wait:
    """What the scheduler waits for after launching ``step``."""
    if marked_waiting(entry):
        return Wait.MOVE_ON
    if spec_rules:
        return Wait.DONE_OR_WAITING
    if step.expects_blocking(flavor):
        return Wait.UNTIL_WAITING
    return Wait.UNTIL_DONE


class EntryKind(StrEnum):
    """What an ``Entry`` records."""

    NOTE = "note"  # narration (a step's note, a cluster session's message)
    LAUNCH = "launch"  # a step was sent
    BLOCKED = "blocked"  # the server reported a step waiting
    FINISH = "finish"  # a step's answer came back
    PROBLEM = "problem"  # a step could not run or finish as the scenario says


@dataclass
class Entry:
    """One line-worthy moment of a run, for transcript writers."""

    kind: EntryKind
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


class Scheduler:
    """Runs a scenario's steps on a Race, one ``step`` call at a time."""

    def __init__(self, race: Race, scenario: Scenario, *, step_timeout: float = 10.0,
                 on_entry: Callable[[Entry], None] | None = None, spec_rules: bool | None = None):
        self.race = race
        self.flavor = race.backend.flavor
        self.scenario = scenario.for_flavor(self.flavor)  # per-engine SQL: this server's variant
        self.step_timeout = step_timeout
        self.on_entry = on_entry or (lambda entry: None)
        # isolation specs state no expectations: their steps follow isolationtester's rules
        self.spec_rules = scenario.kind == ScenarioKind.ISOLATION_SPEC if spec_rules is None else spec_rules
        self.launched = 0
        self.finished_after: dict[int, int] = {}
        self.pending: dict[str, tuple[StepRecord, RunningStatement]] = {}
        self.report = RunReport(self.scenario, self.flavor, race.backend.server_name)
        self._attached = False

    # ------------------------------------------------------------ lifecycle
    def attach(self) -> None:
        """Listen to the race's events (which pending step the server reports blocked)."""
        if not self._attached:
            self.race.subscribe(self._on_event)
            self._attached = True

    def detach(self) -> None:
        if self._attached:
            self.race.unsubscribe(self._on_event)
            self._attached = False

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
        """A statement the scheduler issues itself (session setup/teardown, ROLLBACK):
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

    def check_closed_sessions(self) -> None:
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

    # ---------------------------------------------------------------- events
    def _on_event(self, event) -> None:
        if isinstance(event, StatementFinished):
            # "completes after step N" is judged at the moment the server answered,
            # not when the scheduler got round to collecting the step
            self.finished_after[event.stmt_id] = self.launched
        if isinstance(event, ServerNote) and event.node and event.session:
            # cluster races: what a node says about a session's statement (a hot
            # standby: "replay on the standby waits for C ...") goes into the transcript
            self.on_entry(Entry(EntryKind.NOTE, text=f"{event.session}@{event.node}: {event.text}"))
        if isinstance(event, StatementBlocked):
            for record, stmt in self.pending.values():
                if getattr(stmt, "stmt_id", None) == event.stmt_id:
                    record.was_blocked = True
                    record.blockers = event.blockers
                    self.on_entry(Entry(EntryKind.BLOCKED, record, blockers=event.blockers, lock=event.lock))

    # ----------------------------------------------------------------- steps
    async def step(self, step: Step, index: int, entry: PermutationEntry | None = None) -> StepRecord:
        """Launch ``step`` (number ``index`` in the permutation), wait as its policy says,
        then collect the steps launched earlier that finished or are due now."""
        policy = wait_policy(step, self.flavor, spec_rules=self.spec_rules, entry=entry)
        if self.spec_rules:
            # isolationtester: a session's earlier step must complete before its next one is sent
            for earlier, running in list(self.pending.values()):
                if earlier.step.session == step.session:
                    await self._await_done(earlier, running)
        record, stmt = await self._launch(step, index)
        if stmt is None:
            return record
        if policy is Wait.UNTIL_DONE:
            await self._await_done(record, stmt)
        elif policy is Wait.UNTIL_WAITING:
            if not await self.race.wait_blocked_or_done(stmt, self.step_timeout):
                record.problem = (f"was expected to block but the server never reported it waiting"
                                  f" within {self.step_timeout:g} s")
        elif policy is Wait.DONE_OR_WAITING:
            await self._done_or_waiting(stmt)
            if stmt.done.is_set() or not stmt.blocked.is_set():
                await self._await_done(record, stmt)  # done, or neither done nor waiting: cancelled
        await self._collect(final=False)
        return record

    async def finish(self) -> None:
        """After the last step: wait for every step still pending."""
        await self._collect(final=True)
        self.report.problems.extend(check_across(self.scenario.across, self.report.records, self.flavor))

    async def _done_or_waiting(self, stmt) -> None:
        waits = [asyncio.ensure_future(stmt.done.wait()), asyncio.ensure_future(stmt.blocked.wait())]
        try:
            await asyncio.wait(waits, timeout=self.step_timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()

    async def _launch(self, step: Step, index: int) -> tuple[StepRecord, RunningStatement | None]:
        """Narrate, then start ``step`` in its session; no statement if the session is busy."""
        if step.note:
            self.on_entry(Entry(EntryKind.NOTE, text=step.note))
        record = StepRecord(step, index)
        self.report.records.append(record)
        session = self.race.sessions.get(step.session)
        if session is None:
            session = await self.race.add_session(step.session)
        if session.busy:
            record.problem = f"session {step.session} is still busy with an earlier statement"
            record.failures = check(record, step.applicable(self.flavor))
            self.on_entry(Entry(EntryKind.PROBLEM, record, text=record.problem))
            return record, None
        stmt = self.race.submit(step.session, step.sql_for(self.flavor) or step.sql)  # per-engine SQL
        self.launched = index
        self.pending[step.name] = (record, stmt)
        self.on_entry(Entry(EntryKind.LAUNCH, record))
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
        self.on_entry(Entry(EntryKind.FINISH, record))

    async def _collect(self, final: bool) -> None:
        """Collect blocked steps that finished or are due to finish now."""
        if not self.pending:
            return
        # steps that already finished while others ran
        for record, stmt in list(self.pending.values()):
            if stmt.done.is_set():
                self._complete(record, stmt)
        due = []
        for record, stmt in list(self.pending.values()):
            after = [e.value for e in record.step.applicable(self.flavor)
                     if e.key == "completes_after" and isinstance(e.value, int)]
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
