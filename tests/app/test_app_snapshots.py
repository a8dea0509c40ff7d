"""Snapshot tests of the main layout (pytest-textual-snapshot).

The pictures are taken in a fixed state with no timings on screen: the app
connected to the embedded PostgreSQL 18 with a scenario loaded but no step
run yet, at 80x24, 100x30, 120x40 and 160x48 (and with a panel zoomed at
80x24), and the help screen.  Update with ``pytest --snapshot-update``
after checking the new SVG by eye.
"""

from __future__ import annotations

import asyncio

import pytest

from lockrace.app.app import LockraceApp
from lockrace.scenario.library import resolve


def _same_pids(app) -> None:
    """Each panel's title names its backend's pid, which differs from run to run: the
    pictures show fixed ones (4241, 4242, ...)."""
    for i, panel in enumerate(app._panel_list):
        panel.status.ident = 4241 + i
        panel._retitle()


def _ready(app):
    async def run_before(pilot):
        await asyncio.wait_for(app.ready.wait(), 30)
        await pilot.pause()
        _same_pids(app)
        app.screen.set_focus(None)  # no blinking cursor in the picture
        await pilot.pause()
    return run_before


SIZES = [(80, 24), (100, 30), (120, 40), (160, 48)]


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_main_layout_scenario_loaded(snap_compare, pg_server, size):
    app = LockraceApp(scenario=resolve("pg-nowait"), targets={"postgres": pg_server})
    assert snap_compare(app, terminal_size=size, run_before=_ready(app))


def test_zoomed_panel_at_80x24(snap_compare, pg_server):
    app = LockraceApp(scenario=resolve("pg-nowait"), targets={"postgres": pg_server})

    async def run_before(pilot):
        await asyncio.wait_for(app.ready.wait(), 30)
        await pilot.press("alt+b", "f10")
        await pilot.pause()
        _same_pids(app)
        app.screen.set_focus(None)
        await pilot.pause()

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_help_screen(snap_compare, pg_server):
    app = LockraceApp(targets={"postgres": pg_server})

    async def run_before(pilot):
        await _ready(app)(pilot)
        await pilot.press("f1")
        await pilot.pause()

    assert snap_compare(app, terminal_size=(120, 44), run_before=run_before)
