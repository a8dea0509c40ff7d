"""The lock-view queries: readable .sql files per server flavor, kept with each
flavor's dialect in ``lockrace/dialects/sql/<flavor>/`` and shipped inside the
package (see ``Dialect.lock_view``).

``--`` comment lines at the top of a file document it and are stripped;
what remains is sent as is (placeholders as the driver or the caller expects,
documented in each file)."""

from __future__ import annotations

from ..dialects.base import lock_view_text


def query(server: str, name: str) -> str:
    """The text of ``sql/<server>/<name>.sql`` (``server``: a flavor), leading comment lines removed."""
    return lock_view_text(server, name)
