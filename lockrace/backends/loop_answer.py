"""What PostgreSQL's and MariaDB/MySQL's sessions share to read an answer on
the event loop (postgres._LoopRead, mysql_answer.LoopRead).

``SocketWatch``: the loop watches a session's socket (a reader, and
arrivals noted: see arrival.py) while an answer is read there, and stops
looking when the session's thread reads instead.  ``LoopAnswer``: the answer's
future and how it is settled, whether the loop read it or the thread did.
"""

from __future__ import annotations

import asyncio
import contextlib

from ..core.events import StatementResult
from . import arrival


class SocketWatch:
    """Mixin for a session: ``_reading`` is the answer the loop reads (or None)."""

    def _init_watch(self) -> None:
        self._reading = None  # an answer being read on the loop
        self._watch_loop: asyncio.AbstractEventLoop | None = None  # the loop that has a reader on the socket
        self._watch_fd = -1
        self._arrival_fd = -1  # the socket whose arrivals are noted (see arrival.py)
        self._arrival_sig = 0

    def _socket_fd(self) -> int | None:
        raise NotImplementedError

    def _watching(self) -> asyncio.AbstractEventLoop | None:
        """The running loop, once it watches this session's socket (a reader, and
        arrivals noted: see arrival.py); None where it cannot."""
        loop = asyncio.get_running_loop()
        if self._watch_loop is None:
            fd = self._socket_fd()
            if fd is None:
                return None
            if self._arrival_fd != fd:
                signum = arrival.watch(fd)
                if signum is None:
                    return None
                self._arrival_fd, self._arrival_sig = fd, signum
            loop.add_reader(fd, self._readable)
            self._watch_loop, self._watch_fd = loop, fd
        elif self._watch_loop is not loop:
            return None
        # (watched since an earlier statement: the socket stays the same while it is open)
        arrival.take(self._arrival_sig)  # whatever came before this statement is not its answer
        return loop

    def _readable(self) -> None:
        if self._reading is not None:
            self._reading.readable()
        else:  # the thread reads now (a long answer, the budgets): the loop stops looking
            self._unwatch()

    def _unwatch(self, arrivals: bool = False) -> None:
        if self._watch_loop is not None:
            with contextlib.suppress(Exception):
                self._watch_loop.remove_reader(self._watch_fd)
            self._watch_loop = None
        if arrivals and self._arrival_fd >= 0:
            arrival.unwatch(self._arrival_fd, self._arrival_sig)
            self._arrival_fd = -1


class LoopAnswer:
    """The answer to one statement sent from the loop: ``future`` gets it, and
    ``on_answer`` (see SessionConnection.send) hears of it first."""

    __slots__ = ("loop", "future", "on_answer")

    def __init__(self, loop: asyncio.AbstractEventLoop, on_answer=None):
        self.loop, self.on_answer = loop, on_answer
        self.future: asyncio.Future = loop.create_future()

    def _from_thread(self, rest: asyncio.Future) -> None:
        """The session's thread read the rest of the answer."""
        if rest.cancelled() or self.future.done():
            return
        if rest.exception() is not None:
            self.future.set_exception(rest.exception())
        else:
            self._settle(rest.result())

    def _tell(self, result: StatementResult, final: bool) -> None:
        if self.on_answer is not None:
            try:
                self.on_answer(result, final)
            except Exception as exc:  # the caller's task takes the answer in as usual
                self.loop.call_exception_handler({"message": "lockrace: answer hook failed", "exception": exc})

    def _settle(self, result: StatementResult) -> None:
        if self.future.done():
            return  # the caller stopped waiting
        self._tell(result, final=True)
        self.future.set_result(result)
