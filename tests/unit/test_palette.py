"""The app's colours live in one .tcss file as Textual theme variables; Python and
app.tcss name them (``$lr-amber``), never spell a colour value."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lockrace.app.palette import VARIABLES, themed
from support.paths import REPO

APP = REPO / "lockrace" / "app"
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
    assert themed("bold $lr-on-badge on $lr-blocked") == f"bold {VARIABLES['lr-on-badge']} on {VARIABLES['lr-blocked']}"


async def test_the_app_registers_them_as_theme_variables():
    from lockrace.app.app import LockraceApp

    app = LockraceApp(targets={})
    assert {k: app.get_css_variables()[k] for k in VARIABLES} == VARIABLES


HUES = {"amber", "red", "green", "blue", "sky", "scarlet", "crimson", "maroon", "orange", "teal", "orchid", "grey",
        "silver", "white", "ink", "cream", "olive", "lilac", "tan", "rose", "rust", "magenta", "khaki", "slate",
        "moss", "violet", "blood", "darkred", "salmon", "lavender", "steel", "pale", "dim"}


def test_names_say_the_part_a_colour_plays_not_its_hue():
    assert {"lr-blocked", "lr-refused", "lr-timed-out", "lr-skipped", "lr-deadlock", "lr-focus"} <= set(VARIABLES)
    assert [n for n in VARIABLES if set(n.removeprefix("lr-").split("-")) & HUES] == []


def _theme_with(base, **colours):
    import dataclasses

    return dataclasses.replace(base, name="test-colours", variables={**base.variables, **colours})


async def test_a_theme_that_sets_a_role_recolours_css_and_python_styles():
    from lockrace.app import palette
    from lockrace.app.app import LockraceApp
    from lockrace.app.status import STYLES
    from lockrace.app.timeline import BAR_STYLES

    app = LockraceApp(targets={})
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            assert STYLES["blocked"] == f"bold {VARIABLES['lr-on-badge']} on {VARIABLES['lr-blocked']}"
            app.register_theme(_theme_with(app.current_theme, **{"lr-blocked": "#123456", "lr-refused": "#abcdef"}))
            app.theme = "test-colours"
            await pilot.pause()
            await pilot.pause()
            assert app.get_css_variables()["lr-blocked"] == "#123456"
            assert themed("$lr-blocked") == "#123456"
            assert STYLES["blocked"].endswith("on #123456") and BAR_STYLES["refused"] == "#abcdef"
            assert themed("$lr-ok") == VARIABLES["lr-ok"]  # what the theme does not set keeps its default
    finally:
        palette.use_theme(VARIABLES)


async def test_a_colours_file_becomes_the_apps_theme(tmp_path):
    from lockrace.app import palette
    from lockrace.app.app import LockraceApp

    path = tmp_path / "mine.tcss"
    path.write_text("/* mine */\n$lr-blocked: #ff00ff;\n$lr-focus: rgb(1, 2, 3);\n")
    colours = palette.read_overrides(str(path))
    assert colours == {"lr-blocked": "#ff00ff", "lr-focus": "rgb(1, 2, 3)"}
    app = LockraceApp(targets={}, colours=colours)
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            assert app.theme == "lockrace-colours"
            assert app.get_css_variables()["lr-blocked"] == "#ff00ff"
            assert themed("$lr-blocked on $lr-ok") == f"#ff00ff on {VARIABLES['lr-ok']}"
    finally:
        palette.use_theme(VARIABLES)


@pytest.mark.parametrize("text, words", [
    ("$lr-amber: #ffd75f;\n", "names $lr-amber, which lockrace does not have"),
    ("$lr-blocked: not-a-colour;\n", "$lr-blocked is 'not-a-colour', which is not a colour"),
    ("blocked = yellow\n", "declares no colours"),
])
def test_a_bad_colours_file_is_one_sentence(tmp_path, text, words):
    from lockrace.app.palette import read_overrides

    path = tmp_path / "bad.tcss"
    path.write_text(text)
    with pytest.raises(ValueError, match=re.escape(words)):
        read_overrides(str(path))
    with pytest.raises(ValueError, match="cannot read the colours file"):
        read_overrides(str(tmp_path / "missing.tcss"))


def test_lockrace_refuses_a_bad_colours_file_before_starting_anything(tmp_path):
    import os
    import subprocess
    import sys

    path = tmp_path / "bad.tcss"
    path.write_text("$lr-nothing: #000000;\n")
    env = {**os.environ, "LOCKRACE_COLOURS": str(path)}
    done = subprocess.run([sys.executable, "-m", "lockrace"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"lockrace: the colours file {path} names $lr-nothing, which lockrace does not have "
        "(its names are in lockrace/app/palette.tcss)"]
