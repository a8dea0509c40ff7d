"""The app's colours live in one .tcss file as Textual theme variables; Python and
app.tcss name them (``$lr-amber``), never spell a colour value."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lockrace.app.palette import VARIABLES, themed

APP = Path(__file__).resolve().parents[1] / "lockrace" / "app"
COLOUR = re.compile(r"#[0-9a-fA-F]{3}(?:[0-9a-fA-F]{3})?\b")


@pytest.mark.parametrize("path", sorted(APP.glob("*.py")) + [APP / "app.tcss"], ids=lambda p: p.name)
def test_no_colour_values_outside_the_palette(path: Path):
    hits = [f"{path.name}:{n}: {line.strip()}" for n, line in enumerate(path.read_text().splitlines(), 1)
            if COLOUR.search(line)]
    assert hits == []


def test_every_name_used_is_declared_and_resolves():
    used = set()
    for path in list(APP.glob("*.py")) + [APP / "app.tcss"]:
        used |= set(re.findall(r"\$(lr-[a-z][\w-]*)", path.read_text()))
    assert used and used <= set(VARIABLES)
    assert themed("bold $lr-ink on $lr-amber") == f"bold {VARIABLES['lr-ink']} on {VARIABLES['lr-amber']}"


async def test_the_app_registers_them_as_theme_variables():
    from lockrace.app.app import LockraceApp

    app = LockraceApp(targets={})
    assert {k: app.get_css_variables()[k] for k in VARIABLES} == VARIABLES
