"""lockrace's colours by name: the values live in ``palette.tcss`` as Textual
theme variables (``$lr-amber: <colour>;``), registered by the app as theme
defaults, used by ``app.tcss``, and resolved here for Rich styles built in
Python: ``themed("bold $lr-ink on $lr-amber")``."""

from __future__ import annotations

import re
from importlib.resources import files

_DECLARATION = re.compile(r"^\$([\w-]+)\s*:\s*([^;]+);", re.MULTILINE)
_REFERENCE = re.compile(r"\$([\w-]+)")


def _load() -> dict[str, str]:
    text = (files(__package__) / "palette.tcss").read_text(encoding="utf-8")
    return {name: value.strip() for name, value in _DECLARATION.findall(text)}


VARIABLES: dict[str, str] = _load()


def themed(spec: str) -> str:
    """A Rich style with every ``$lr-NAME`` replaced by the palette's value."""
    return _REFERENCE.sub(lambda m: VARIABLES[m.group(1)], spec)
