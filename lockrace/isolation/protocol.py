"""What the isolation runner needs from an engine's connections."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Item:
    """One piece of a step's output: ``rows`` (a formatted result set),
    ``error`` (one line) or ``other``."""

    kind: str
    data: bytes
