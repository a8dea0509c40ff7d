"""The lock-view queries, kept as readable .sql files per server in
``lockrace/backends/sql/<server>/`` and shipped inside the package.

``--`` comment lines at the top of a file document it and are stripped;
what remains is sent as is (placeholders as the driver or the caller expects,
documented in each file)."""

from __future__ import annotations

from functools import cache
from importlib.resources import files


@cache
def query(server: str, name: str) -> str:
    """The text of ``sql/<server>/<name>.sql``, leading comment lines removed."""
    text = (files(__package__) / "sql" / server / f"{name}.sql").read_text(encoding="utf-8")
    lines = text.splitlines()
    while lines and (lines[0].startswith("--") or not lines[0].strip()):
        lines.pop(0)
    return "\n".join(lines) + "\n"
