"""The one way a test waits for something: ``eventually()`` polls until a condition holds.

A test never sleeps for a fixed time to let something happen; it waits for what
it can see (a line printed, a connection gone, a lock held), bounded by a timeout.
"""

from __future__ import annotations

import time


class _Poll:
    def __init__(self, read, ok, timeout: float, what: str | None, fail: bool):
        self.read, self.ok, self.fail = read, ok, fail
        self.what = what or getattr(read, "__name__", "a condition")
        self.deadline = time.monotonic() + timeout
        self.timeout = timeout

    def step(self):
        """(done, value): done when ok(value) holds, or when the time is up."""
        value = self.read()
        if self.ok(value):
            return True, value
        if time.monotonic() > self.deadline:
            if self.fail:
                raise AssertionError(f"timed out after {self.timeout:g} s waiting for {self.what} "
                                     f"(last seen: {value!r})")
            return True, value
        return False, value


def eventually(read, ok=bool, *, timeout: float = 10.0, every: float = 0.05, what: str | None = None,
               fail: bool = True, pause=None):
    """Call ``read()`` until ``ok(its value)`` holds, and return that value.

    When ``timeout`` seconds pass first: an AssertionError naming ``what`` and the
    last value, or (``fail=False``) that last value. ``pause``: an async function
    that waits ``every`` seconds (``pilot.pause``, ``asyncio.sleep``); given one,
    eventually() returns a coroutine to await, so the event loop keeps running.
    """
    poll = _Poll(read, ok, timeout, what, fail)
    if pause is None:
        while True:
            done, value = poll.step()
            if done:
                return value
            time.sleep(every)

    async def waiting():
        while True:
            done, value = poll.step()
            if done:
                return value
            await pause(every)

    return waiting()
