"""What the isolation runner needs from an engine's connections."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Item:
    """One piece of a step's output: ``rows`` (a formatted result set),
    ``error`` (one line) or ``other``."""

    kind: str
    data: bytes


class InputFailed(Exception):
    """Reading from a session's connection failed (isolationtester:
    "PQconsumeInput failed: ..." and exit).  args[0]: the driver's message."""


class SendFailed(Exception):
    """A step could not be sent (isolationtester: "failed to send query for
    step NAME: ..." and exit)."""


class Control(Protocol):
    """The control connection: asks the server whether a session waits (``PgControl``, ``MyControl``)."""

    async def prepare(self, pids: list[int]) -> None: ...

    async def is_blocked(self, pid: int) -> bool: ...

    async def exec_block(self, sql: str, timeout: float | None = None) -> tuple[bool, list[Item], bytes]: ...

    def close(self) -> None: ...
