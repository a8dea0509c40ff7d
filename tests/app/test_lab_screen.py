"""The lab screen runs the lab on a real server and shows table and strips."""

from __future__ import annotations

import asyncio
import io

from rich.console import Console

from textual.app import App

from lockrace.app.lab_screen import LabScreen
from lockrace.lab.strip import Axis, axis_for, counts, tick_line


class _Host(App):
    def __init__(self, screen: LabScreen):
        super().__init__()
        self.lab = screen

    def on_mount(self) -> None:
        self.push_screen(self.lab)


def _text(widget) -> str:
    """What a Static shows, as plain text."""
    console = Console(width=140, record=True, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()


async def test_lab_screen_runs_and_shows_table_and_strips(pg_backend):
    await pg_backend.reset_sandbox()  # other tests may have dropped it
    screen = LabScreen(pg_backend, runs=2, hold_ms=200, budget_ms=40, warmup=1)
    app = _Host(screen)
    async with app.run_test(size=(140, 40)) as pilot:
        await asyncio.wait_for(screen.done.wait(), 30)
        await pilot.pause()
        assert screen.error == ""
        result = screen.result
        assert result is not None and result.modes["nowait"].summary.errors == 2
        table = _text(screen.query_one("#lab-table"))
        strips = _text(screen.query_one("#lab-strips"))
        for label in ("default FOR UPDATE", "lock_timeout=40ms", "FOR UPDATE NOWAIT", "SKIP LOCKED"):
            assert label in strips
        assert "ms" in strips.splitlines()[-1]  # the axis
        assert "lock errors / 2" in table and "FOR UPDATE NOWAIT" in table
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is not screen


async def test_lab_screen_shows_refusal_of_bad_arguments(pg_backend):
    screen = LabScreen(pg_backend, runs=2, hold_ms=100, budget_ms=100)
    app = _Host(screen)
    async with app.run_test(size=(120, 30)) as pilot:
        await asyncio.wait_for(screen.done.wait(), 10)
        await pilot.pause()
        assert "must outlast" in screen.error
        assert "must outlast" in _text(screen.query_one("#lab-head"))


def test_strip_axis_places_waits_by_order_of_magnitude():
    axis = axis_for(500, 60)
    cells = counts([0.30, 0.31, 101, 102, 499], axis)
    assert sum(cells) == 5
    nowait, bounded, default = axis.cell(0.3), axis.cell(101), axis.cell(499)
    assert nowait < bounded < default < axis.width
    assert cells[nowait] == 2
    assert Axis(0.1, 1000, 40).cell(0.01) == 0 and Axis(0.1, 1000, 40).cell(5000) == 39
    assert "100" in tick_line(axis)
