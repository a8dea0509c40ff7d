"""What PostgreSQL's and MariaDB/MySQL's sessions share to read an answer on
the event loop (postgres._LoopRead, mysql_answer.LoopRead).

``SocketWatch``: the loop watches a session's socket (a reader, and
arrivals noted: see arrival.py) while an answer is read there, and stops
looking when the session's thread reads instead.  ``LoopAnswer``: the answer's
future and how it is settled, whether the loop read it or the thread did.
``keep_awake``: while an answer is due, the loop does not sleep long.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref

from ..core.events import StatementResult
from . import arrival


class SocketWatch:
    """Mixin for a session: ``reading`` is the answer the loop reads (or None)."""

    def _init_watch(self) -> None:
        self.reading: LoopAnswer | None = None  # an answer being read on the loop
        self._watch_loop: asyncio.AbstractEventLoop | None = None  # the loop that has a reader on the socket
        self._watch_fd = -1
        self._arrival_fd = -1  # the socket whose arrivals are noted (see arrival.py)
        self.arrival_signal = 0

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
                self._arrival_fd, self.arrival_signal = fd, signum
            loop.add_reader(fd, self._readable)
            self._watch_loop, self._watch_fd = loop, fd
        elif self._watch_loop is not loop:
            return None
        # (watched since an earlier statement: the socket stays the same while it is open)
        arrival.take(self.arrival_signal)  # whatever came before this statement is not its answer
        return loop

    def _readable(self) -> None:
        if self.reading is not None:
            self.reading.readable()
        else:  # the thread reads now (a long answer, the budgets): the loop stops looking
            self.unwatch()

    def unwatch(self, arrivals: bool = False) -> None:
        if self._watch_loop is not None:
            with contextlib.suppress(Exception):
                self._watch_loop.remove_reader(self._watch_fd)
            self._watch_loop = None
        if arrivals and self._arrival_fd >= 0:
            arrival.unwatch(self._arrival_fd, self.arrival_signal)
            self._arrival_fd = -1


# While any answer is due on a loop, the loop wakes every AWAKE_TICK_S (None: it
# sleeps until the answer or its next timer).  A CPU that has been quiet for long
# is slow to take an answer in: on this project's virtual machine, a MariaDB lock
# wait timeout that came after a second of quiet reached lockrace's caller
# 0.06-0.19 ms later than with a wake-up every 5-50 ms (bench/keep_awake.py,
# eleven runs; a bare asyncio reader showed the same).  Why exactly (the CPU's
# idle polling has stopped, its caches have gone cold) was not pinned down.
# Every 20 ms costs 0.1-0.3 % of a core while a statement waits (the app with
# three sessions blocked: 2.0-2.1 % against 1.5-2.1 % without), and nothing
# once none does.
AWAKE_TICK_S: float | None = 0.02


class _KeepAwake:
    """One per loop: the answers due on it, and the tick's timer while there are any."""

    __slots__ = ("due", "timer", "__weakref__")

    def __init__(self):
        self.due: list[asyncio.Future] = []
        self.timer: asyncio.TimerHandle | None = None

    def add(self, loop: asyncio.AbstractEventLoop, future: asyncio.Future) -> None:
        if not AWAKE_TICK_S:
            return  # (kept only while a tick runs to let go of the done ones)
        self.due.append(future)
        if self.timer is None:
            self.timer = loop.call_later(AWAKE_TICK_S, self._tick, loop)

    def _tick(self, loop: asyncio.AbstractEventLoop) -> None:
        # the answer's own way does nothing for this: the tick sees it is done
        self.due = [f for f in self.due if not f.done()]
        self.timer = loop.call_later(AWAKE_TICK_S, self._tick, loop) if self.due and AWAKE_TICK_S else None


_keepers: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _KeepAwake]" = weakref.WeakKeyDictionary()


def keep_awake(loop: asyncio.AbstractEventLoop, future: asyncio.Future) -> None:
    """``loop`` wakes every AWAKE_TICK_S until ``future`` is done (and every other
    future given to it)."""
    keeper = _keepers.get(loop)
    if keeper is None:
        keeper = _keepers[loop] = _KeepAwake()
    keeper.add(loop, future)


def kept_awake(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether ``loop``'s tick is running (an answer is due, or was at the last tick)."""
    keeper = _keepers.get(loop)
    return keeper is not None and keeper.timer is not None


class LoopAnswer:
    """The answer to one statement sent from the loop: ``future`` gets it, and
    ``on_answer`` (see SessionConnection.send) hears of it first."""

    __slots__ = ("loop", "future", "on_answer")

    def __init__(self, loop: asyncio.AbstractEventLoop, on_answer=None):
        self.loop, self.on_answer = loop, on_answer
        self.future: asyncio.Future = loop.create_future()
        keep_awake(loop, self.future)  # (after the send: the server has the statement already)

    def readable(self) -> None:
        """The session's socket turned readable: read what is there."""
        raise NotImplementedError

    def abandon(self) -> None:
        """The session closes while its answer is still awaited."""
        raise NotImplementedError

    def _from_thread(self, rest: asyncio.Future) -> None:
        """The session's thread read the rest of the answer."""
        if rest.cancelled() or self.future.done():
            return
        error = rest.exception()
        if error is not None:
            self.future.set_exception(error)
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
