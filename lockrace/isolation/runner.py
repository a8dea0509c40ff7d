"""isolationtester's schedule and transcript, engine-neutral.

This follows the behaviour of PostgreSQL's src/test/isolation/isolationtester.c
(REL_18): for each permutation it runs the global setup blocks on the control
connection, then each session's setup, then the steps in order.  A step is
sent and polled: while its connection has no complete result, wait up to
``poll`` seconds for input; after a silent interval, ask the server (control
connection) whether the step's backend is blocked by one of this spec's
sessions.  If so the step is reported ``<waiting ...>`` and the next step is
launched; waiting steps are polled again after every later step and reported
``<... completed>`` when done: the engine scheduler's ``Wait.DONE_OR_WAITING``
policy (``engine/scheduler.py``, which the app steps a spec with), here at
libpq level so that every byte matches upstream's.  Blockers in the
permutation delay the report: ``(*)`` prints ``<waiting ...>`` at launch
whatever happens, ``(other)`` holds the completion report while step
``other`` is still running, ``(other notices N)`` until ``other``'s session
has sent N more notices.

Messages isolationtester writes to stderr (setup failures, timeouts) are part
of upstream's expected files (pg_regress runs it with 2>&1), so they go to the
same transcript here.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from ..engine.scheduler import Wait, wait_policy
from ..scenario.model import Blocker, PermutationEntry, Scenario
from ..scenario.spec_format import unused_steps
from .protocol import Control, InputFailed, SendFailed

NONBLOCK = 1
RETRY = 2

POLL_INTERVAL = 0.005
"""Seconds of silence before asking the server whether a step waits
(upstream: 10 ms)."""


def _raw(exc: Exception) -> bytes:
    """The libpq message an InputFailed / SendFailed carries, as bytes."""
    arg = exc.args[0] if exc.args else b""
    return arg if isinstance(arg, bytes) else str(arg).encode()


class SpecAborted(Exception):
    """isolationtester would exit(1) here: the rest of the spec does not run."""


@dataclass
class PStep:
    entry: PermutationEntry
    name: str
    session: str
    sql: bytes
    blockers: list[Blocker]
    policy: Wait
    target_notices: dict[int, int] = field(default_factory=dict)


class SpecRunner:
    def __init__(self, spec: Scenario, opener, emit, step_timeout: float = 300.0, poll: float = POLL_INTERVAL):
        """``opener(name, counted)`` -> an open connection (``counted`` False for
        the control connection); ``emit(bytes)`` receives the transcript."""
        self.spec = spec
        self.opener = opener
        self.emit = emit
        self.step_timeout = step_timeout
        self.poll = poll
        self.steps = {s.name: s for s in spec.steps}
        self.order = [s.name for s in spec.sessions]
        self.conns: dict = {}
        self.control: Control | None = None
        self.active: dict[str, PStep | None] = {}
        self.aborted = False

    @property
    def _control(self) -> Control:
        assert self.control is not None, "opened first (_open)"
        return self.control

    # ------------------------------------------------------------------ main
    async def run(self) -> bool:
        """Run every permutation; False if the spec was aborted."""
        for name in unused_steps(self.spec):
            self.emit(b"unused step name: %s\n" % name.encode())
        self.emit(b"Parsed test spec with %d sessions\n" % len(self.spec.sessions))
        try:
            await self._open()
            for perm in self.spec.order():
                try:
                    await self._run_permutation(perm)
                except InputFailed as exc:
                    self.emit(b"PQconsumeInput failed: %s\n" % _raw(exc))
                    raise SpecAborted from None
        except SpecAborted:
            self.aborted = True
            await self._abandon()
        finally:
            self._close()
        return not self.aborted

    async def _open(self) -> None:
        try:
            self.control = await self.opener("control connection", False)
            for name in self.order:
                self.conns[name] = await self.opener(name, True)
        except Exception as exc:  # noqa: BLE001 - reported as upstream does
            index = len(self.conns) + (1 if self.control is not None else 0)
            self.emit(b"Connection %d failed: %s\n" % (index, str(exc).strip().encode()))
            raise SpecAborted from None
        self.active = {name: None for name in self.order}
        try:
            await self._control.prepare([c.pid for c in self.conns.values()])
        except Exception as exc:  # noqa: BLE001
            self.emit(str(exc).encode() + b"\n")
            raise SpecAborted from None

    def _close(self) -> None:
        for conn in self.conns.values():
            conn.close()
        if self.control is not None:
            self.control.close()

    async def _abandon(self) -> None:
        """After an abort: stop whatever still runs so the server is left clean."""
        for name, ps in self.active.items():
            if ps is not None:
                self.conns[name].cancel()
        for conn in self.conns.values():
            await conn.rollback_quietly()

    # ------------------------------------------------------------ one permutation
    def _pstep(self, entry: PermutationEntry) -> PStep:
        step = self.steps[entry.step]
        return PStep(entry, step.name, step.session, step.sql.encode(), list(entry.blockers),
                     wait_policy(step, "", spec_rules=True, entry=entry))

    async def _run_permutation(self, perm: list[PermutationEntry]) -> None:
        self.emit(b"\nstarting permutation:" + b"".join(b" " + e.step.encode() for e in perm) + b"\n")
        for sql in self.spec.setup.get(None, []):
            ok, items, error = await self._control.exec_block(sql, self.step_timeout)
            self._emit_items(items)
            if not ok:
                self.emit(b"setup failed: " + error)
                raise SpecAborted
        for sdef in self.spec.sessions:
            for sql in sdef.setup:
                ok, items, error = await self.conns[sdef.name].exec_block(sql, self.step_timeout)
                self._emit_items(items)
                if not ok:
                    self.emit(b"setup of session %s failed: %s" % (sdef.name.encode(), error))
                    raise SpecAborted

        waiting: list[PStep] = []
        loop = asyncio.get_running_loop()
        for entry in perm:
            ps = self._pstep(entry)
            conn = self.conns[ps.session]
            if self.active[ps.session] is not None:
                start = loop.time()
                while (old := self.active[ps.session]) is not None:
                    if not await self._try_complete(old, RETRY):
                        waiting.remove(old)
                    waiting = await self._try_complete_steps(waiting, NONBLOCK | RETRY)
                    still = self.active[ps.session]
                    if still is not None and loop.time() - start > 2 * self.step_timeout:
                        td = loop.time() - start
                        self.emit(b"step %s timed out after %d seconds\n" % (still.name.encode(), int(td)))
                        names = [a.name for a in self.active.values() if a is not None]
                        self.emit(b"active steps are:" + b"".join(b" " + n.encode() for n in names) + b"\n")
                        raise SpecAborted
            try:
                conn.send(ps.sql.decode())
            except SendFailed as exc:
                self.emit(b"failed to send query for step %s: %s\n" % (ps.name.encode(), _raw(exc)))
                raise SpecAborted from None
            self.active[ps.session] = ps
            for i, b in enumerate(ps.blockers):
                if b.step is not None and b.notices is not None:
                    other = self.conns[self.steps[b.step].session]
                    ps.target_notices[i] = b.notices + other.total_notices
            mustwait = await self._try_complete(ps, NONBLOCK)
            waiting = await self._try_complete_steps(waiting, NONBLOCK | RETRY)
            if mustwait:
                waiting.append(ps)

        waiting = await self._try_complete_steps(waiting, RETRY)
        if waiting:
            self.emit(b"failed to complete permutation due to mutually-blocking steps\n")
            raise SpecAborted

        for name in self.order:
            # MariaDB/MySQL: XA transactions a session left prepared would outlive it (mysql.py)
            hook = getattr(self.conns[name], "end_permutation", None)
            if hook is not None:
                await hook()
        for sdef in self.spec.sessions:
            for sql in sdef.teardown:
                ok, items, error = await self.conns[sdef.name].exec_block(sql, self.step_timeout)
                self._emit_items(items)
                if not ok:
                    self.emit(b"teardown of session %s failed: %s" % (sdef.name.encode(), error))
        for sql in self.spec.teardown.get(None, []):
            ok, items, error = await self._control.exec_block(sql, self.step_timeout)
            self._emit_items(items)
            if not ok:
                self.emit(b"teardown failed: " + error)

    def _emit_items(self, items) -> None:
        for item in items:
            self.emit(item.data)

    # ---------------------------------------------------------- completing steps
    def _take_new_notices(self) -> bool:
        seen = False
        for conn in self.conns.values():
            if conn.any_new_notice:
                seen = True
                conn.any_new_notice = False
        return seen

    async def _try_complete_steps(self, waiting: list[PStep], flags: int) -> list[PStep]:
        while True:
            self._take_new_notices()
            old = len(waiting)
            have_blocker = False
            kept: list[PStep] = []
            for ps in waiting:
                if await self._try_complete(ps, flags):
                    if ps.blockers:
                        have_blocker = True
                    kept.append(ps)
            waiting = kept
            if not (have_blocker and (len(waiting) < old or self._take_new_notices())):
                return waiting

    def _has_blocker(self, ps: PStep) -> bool:
        for i, b in enumerate(ps.blockers):
            if b.step is None:
                continue
            session = self.steps[b.step].session
            if b.notices is None:
                active = self.active[session]
                if active is not None and active.name == b.step:
                    return True
            elif self.conns[session].total_notices < ps.target_notices.get(i, 0):
                return True
        return False

    def _waiting_line(self, ps: PStep) -> bytes:
        return b"step %s: %s <waiting ...>\n" % (ps.name.encode(), ps.sql)

    async def _try_complete(self, ps: PStep, flags: int) -> bool:
        """True while the step is not completed (waiting on a lock or a blocker)."""
        if not flags & RETRY and ps.policy is Wait.MOVE_ON:
            self.emit(self._waiting_line(ps))
            return True
        conn = self.conns[ps.session]
        loop = asyncio.get_running_loop()
        start = loop.time()
        canceled = False
        while conn.busy():
            if await conn.wait_input(self.poll):
                continue
            if flags & NONBLOCK:
                if await self._control.is_blocked(conn.pid):
                    conn.consume()
                    if not conn.busy():
                        break
                    if not flags & RETRY:
                        self.emit(self._waiting_line(ps))
                    return True
            td = loop.time() - start
            if td > self.step_timeout and not canceled:
                if conn.cancel():
                    self.emit(b"isolationtester: canceling step %s after %d seconds\n" % (ps.name.encode(), int(td)))
                    canceled = True
            if td > 2 * self.step_timeout:
                self.emit(b"step %s timed out after %d seconds\n" % (ps.name.encode(), int(td)))
                raise SpecAborted
        if self._has_blocker(ps):
            if not flags & RETRY:
                self.emit(self._waiting_line(ps))
            return True
        if flags & RETRY:
            self.emit(b"step %s: <... completed>\n" % ps.name.encode())
        else:
            self.emit(b"step %s: %s\n" % (ps.name.encode(), ps.sql))
        self._emit_items(conn.results())
        for line in conn.notifies(list(self.conns.values())):
            self.emit(line)
        self.active[ps.session] = None
        return False
