"""The screen keeps up with the terminal: a resize lays out for the new size, the
footer shows the keys that matter at 80 columns and every key at 120, the header's
text is never cut mid-word, the timeline stays readable with budgets of a day or a
year, lock details are never cut at 120 columns and keep the mode at 80, each
panel's title shows its backend's pid, and the lock view (F12) draws who holds
and who waits (real sessions on the embedded PostgreSQL and a private MariaDB)."""

from __future__ import annotations

import pytest

from lockrace.app.keys_footer import KeysFooter
from textual.widgets import Header

from app_helpers import badge, enter, finished, running_app, until


def screen_text(app) -> str:
    """The screen as the terminal shows it, one string per row."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def footer_line(app) -> str:
    return screen_text(app).splitlines()[-1]


async def test_a_resize_lays_out_for_the_new_size(pg_server):
    async with running_app(size=(80, 24), targets={"postgres": pg_server}) as (app, pilot):
        header = app.query_one(Header)
        assert not header.display and app.timeline.compact
        narrow = app.timeline.render().plain.splitlines()[0]
        await pilot.resize_terminal(120, 40)
        await pilot.pause(0.2)
        assert header.display, "120x40 has room for the header"
        assert not app.timeline.compact, "120x40 has room for the timeline's two-line axis"
        wide = app.timeline.render().plain.splitlines()[0]
        assert len(wide.rstrip()) > len(narrow.rstrip()) + 20, (narrow, wide)
        assert app.timeline.region.width == 120
        await pilot.resize_terminal(80, 24)
        await pilot.pause(0.2)
        assert not header.display and app.timeline.compact
        assert len(app.timeline.render().plain.splitlines()[0].rstrip()) < len(wide.rstrip())


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
async def test_the_footer_shows_the_keys_a_user_needs(pg_server, size):
    async with running_app(size=size, targets={"postgres": pg_server}) as (app, pilot):
        await pilot.pause(0.1)
        line = footer_line(app)
        for key in ("F1 Help", "F5 Step", "F9 Scenarios", "F12 Locks", "^S Save", "^Q Quit"):
            assert key in line, f"{key!r} missing from the footer at {size}: {line!r}"
        if size[0] >= 120:
            for key in ("F2", "F3", "F4", "F6", "F7", "F8", "F10"):
                assert f"{key} " in line, f"{key} missing from the footer at {size}: {line!r}"
        assert len(line.rstrip()) <= size[0]


async def test_a_footer_key_runs_on_click(pg_server):
    async with running_app(size=(80, 24), targets={"postgres": pg_server}) as (app, pilot):
        footer = app.query_one(KeysFooter)
        at = footer_line(app).index("F1 Help")
        await pilot.click(KeysFooter, offset=(at + 1, 0))
        await pilot.pause(0.1)
        assert type(app.screen).__name__ == "HelpScreen"


@pytest.mark.parametrize("size", [(80, 24), (100, 28)], ids=["80x24", "100x28"])
async def test_the_header_text_is_not_cut_mid_word(pg_server, size):
    """Below 30 rows the header's text is the timeline's title, and the free-form hint
    has two lines: each says whole parts, never a word cut by the border."""
    async with running_app(size=size, targets={"postgres": pg_server}) as (app, pilot):
        await pilot.pause(0.1)
        rows = screen_text(app).splitlines()
        title_row = next(r for r in rows if "PostgreSQL" in r and "─" in r)
        title = title_row.strip("─╭╮ ").strip()
        assert title.startswith("PostgreSQL"), title_row
        for part in title.split(" · "):
            assert part in app.sub_title or part == "▬ running █ blocked ┃ budget", (part, title_row)
        bar = app._bar_shown[1]
        assert bar.rstrip().endswith((".", ";")), f"the hint ends mid-sentence: {bar!r}"
        box = app.query_one("#scenario-box")
        assert box.virtual_size.height <= box.region.height, "the hint does not fit its lines"
