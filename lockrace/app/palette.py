"""lockrace's colours, named by the part they play (``$lr-blocked``, ``$lr-refused``,
``$lr-focus`` ...).  The values live in ``palette.tcss`` as Textual theme variables,
registered by the app as theme defaults and used by ``app.tcss``; a Textual theme that
sets one of them overrides it.  Rich styles built in Python ask for the same names:
``themed("bold $lr-on-badge on $lr-blocked")`` resolves against the theme in use when it
is called, and a ``StyleTable`` resolves its entries each time one is read, so nothing
is frozen when a module is imported."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from importlib.resources import files
from pathlib import Path

_DECLARATION = re.compile(r"^\$([\w-]+)\s*:\s*([^;]+);", re.MULTILINE)
_REFERENCE = re.compile(r"\$([\w-]+)")


def _load() -> dict[str, str]:
    text = (files(__package__) / "palette.tcss").read_text(encoding="utf-8")
    return {name: value.strip() for name, value in _DECLARATION.findall(text)}


VARIABLES: dict[str, str] = _load()
"""The defaults, as palette.tcss declares them."""

_in_use: dict[str, str] = dict(VARIABLES)
_resolved: dict[str, str] = {}  # spec -> style in the theme in use (emptied when the theme changes)


def use_theme(variables: Mapping[str, str]) -> None:
    """Take the colours of the theme now in use (the app calls this when the theme
    changes); a name the theme does not set keeps its default."""
    global _in_use
    _in_use = {name: str(variables.get(name, default)) for name, default in VARIABLES.items()}
    _resolved.clear()


def colour(name: str) -> str:
    """The value of one variable (without the ``$``) in the theme in use."""
    return _in_use[name]


def themed(spec: str) -> str:
    """A Rich style with every ``$lr-NAME`` replaced by its value in the theme in use."""
    style = _resolved.get(spec)
    if style is None:
        style = _resolved[spec] = _REFERENCE.sub(lambda m: _in_use[m.group(1)], spec)
    return style


class StyleTable(Mapping[str, str]):
    """Named style specs (``{"ok": "bold $lr-ok"}``) resolved when read."""

    def __init__(self, specs: Mapping[str, str]) -> None:
        self._specs = dict(specs)

    def __getitem__(self, key: str) -> str:
        return themed(self._specs[key])

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)


COLOURS_ENV = "LOCKRACE_COLOURS"
"""A .tcss file of ``$lr-NAME: colour;`` lines the app uses over the defaults."""


def read_overrides(path: str) -> dict[str, str]:
    """The ``$lr-NAME: colour;`` declarations of a user's colours file, checked: a
    name lockrace does not have or a value Textual cannot read is one sentence."""
    from textual.color import Color, ColorParseError

    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read the colours file {path}: {exc.strerror or exc}") from None
    found = {name: value.strip() for name, value in _DECLARATION.findall(text)}
    if not found:
        raise ValueError(f"the colours file {path} declares no colours (lines such as '$lr-blocked: orange;')")
    unknown = sorted(set(found) - set(VARIABLES))
    if unknown:
        raise ValueError(f"the colours file {path} names {', '.join('$' + n for n in unknown)}, which lockrace "
                         f"does not have (its names are in lockrace/app/palette.tcss)")
    for name, value in found.items():
        try:
            Color.parse(value)
        except ColorParseError:
            raise ValueError(f"the colours file {path}: ${name} is {value!r}, which is not a colour") from None
    return found
