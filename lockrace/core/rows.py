"""Reading a row a query always returns (``SELECT pg_is_in_recovery()``, ``SELECT @@version``)."""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")


def one(row: T | None) -> T:
    """``cursor.fetchone()``'s row of a query that always returns one; a clear error if not."""
    if row is None:
        raise LookupError("the server returned no row for a query that always returns one")
    return row
