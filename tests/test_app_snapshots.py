"""Snapshot tests of the main layout (pytest-textual-snapshot).

Both pictures are taken in a fixed state with no timings on screen: the app
connected to the embedded PostgreSQL 18 with a scenario loaded but no step
run yet, and the help screen.  Update with ``pytest --snapshot-update``
after checking the new SVG by eye.
"""

from __future__ import annotations

import asyncio

from lockrace.app.app import LockraceApp
from lockrace.scenario.library import resolve


def _ready(app):
    async def run_before(pilot):
        await asyncio.wait_for(app.ready.wait(), 30)
        await pilot.pause()
        app.screen.set_focus(None)  # no blinking cursor in the picture
        await pilot.pause()
    return run_before


def test_main_layout_scenario_loaded(snap_compare, pg_server):
    app = LockraceApp(scenario=resolve("pg-nowait"), targets={"postgres": pg_server})
    assert snap_compare(app, terminal_size=(140, 40), run_before=_ready(app))


def test_help_screen(snap_compare, pg_server):
    app = LockraceApp(targets={"postgres": pg_server})

    async def run_before(pilot):
        await _ready(app)(pilot)
        await pilot.press("f1")
        await pilot.pause()

    assert snap_compare(app, terminal_size=(120, 44), run_before=run_before)
