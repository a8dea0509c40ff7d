"""Helpers for the app's pilot tests (real servers, no mocks)."""

from __future__ import annotations

import asyncio
import contextlib

from support.waits import eventually

from lockrace.app.app import LockraceApp


@contextlib.asynccontextmanager
async def running_app(size=(160, 48), **kwargs):
    """The app, connected and interactive; its race is closed on the way out."""
    app = LockraceApp(**kwargs)
    async with app.run_test(size=size) as pilot:
        await asyncio.wait_for(app.ready.wait(), 30)
        await pilot.pause()
        try:
            yield app, pilot
        finally:
            app.workers.cancel_all()
            await app._close_race()


async def until(pilot, condition, timeout: float = 10.0, what: str = "condition"):
    """Let the app run until ``condition()`` holds (tests/support/waits.py)."""
    await eventually(condition, timeout=timeout, every=0.02, what=what, pause=pilot.pause)


async def enter(pilot, app: LockraceApp, session: str, sql: str) -> None:
    """Focus a session's input line, fill it and submit it (what Enter is bound to).

    Pilot key presses wait for the app to go idle, which takes long while the
    redraw timer runs; the first test drives the same path with real keys.
    """
    panel = app.panels[session]
    panel.input.focus()
    panel.input.value = sql
    await panel.input.action_submit()
    await pilot.pause()


async def finished(pilot, app, session: str, count: int, timeout: float = 10.0) -> None:
    """Wait until ``session`` has finished ``count`` statements in this race."""
    def done():
        st = app.panels[session].status
        return st.running is None and st.statements >= count and st.last is not None
    await until(pilot, done, timeout, f"{session} to finish statement {count}")


def badge(app, session: str) -> str:
    act = app.panels[session].status.activity()
    return act.label if act else ""
