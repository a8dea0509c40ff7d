"""A session's own worker thread: where its driver calls run and are timed.

One thread per session connection (a connection runs one statement at a
time).  Handing a call to it and getting the answer back are the two thread
hops a caller of the engine pays beyond the driver itself, so both are kept
as short as they can be:

* a plain queue, no executor machinery;
* the answer is handed back to the event loop as the thread's very last act
  before it waits for the next call: a thread that goes on running Python
  after waking the loop holds the GIL as the loop wakes up, and the two then
  trade it back and forth (strace shows the futex calls).  Measured on a
  2-core virtual machine, the hand-back after 100 ms asleep: 0.39 ms through
  a ThreadPoolExecutor, 0.15 ms this way.

The thread is a daemon: a driver call stuck on a server that does not answer
never keeps the process from exiting.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from typing import Any, Callable

_STOP = object()


class SessionThread:
    def __init__(self, name: str):
        self._calls: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any) -> asyncio.Future:
        """Run ``fn(*args)`` on the thread; its result (or exception) in the returned
        future of the running loop.  The call runs to its end even if the future is
        cancelled: a driver call is never abandoned half-way."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._calls.put((fn, args, loop, future))
        return future

    def stop(self) -> None:
        """End the thread once the call it runs (if any) returns."""
        self._calls.put(_STOP)

    def _serve(self) -> None:
        while True:
            call = self._calls.get()
            if call is _STOP:
                return
            fn, args, loop, future = call
            outcome: tuple[object, BaseException | None] | None
            try:
                outcome = (fn(*args), None)
            except BaseException as exc:  # handed to the caller, whatever it is
                outcome = (None, exc)
            call = fn = args = None  # nothing of this call outlives it here
            try:
                loop.call_soon_threadsafe(_settle, future, outcome)
            except RuntimeError:
                pass  # the loop is closed: nobody waits for this answer any more
            outcome = future = loop = None


def _settle(future: asyncio.Future, outcome: tuple) -> None:
    if future.done():
        return  # the caller stopped waiting
    value, exc = outcome
    if exc is None:
        future.set_result(value)
    else:
        future.set_exception(exc)
