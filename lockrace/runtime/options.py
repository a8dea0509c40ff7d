"""What the command line chose, as typed values: the CLI turns its parsed arguments into these,
and ``lockrace run``, isolation specs and ``lockrace bench`` read nothing else."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..registry import ENGINES


@dataclass(frozen=True)
class ServerChoice:
    """The DSN given for each engine (``--pg``, ``--mysql``, ``--galera``, ``--standby``);
    an engine without one uses its environment variable, else a private server."""

    dsns: dict[str, str | None] = field(default_factory=dict)

    @classmethod
    def from_flags(cls, flags: Any) -> "ServerChoice":
        """From anything with the flags' attributes (an argparse result); a flag it lacks is not given."""
        return cls({str(e): getattr(flags, spec.dest, None) for e, spec in ENGINES.items()})

    def dsn(self, engine: str) -> str | None:
        return self.dsns.get(engine)

    def given(self) -> list[str]:
        """The engines whose DSN flag was given, in the registry's order."""
        return [str(e) for e in ENGINES if self.dsns.get(e)]


@dataclass
class RunOptions:
    """``lockrace run``: scenarios and isolation specs."""

    engine: str | None = None  # run on this engine only (None: every engine a scenario declares)
    format: str = "transcript"  # transcript | json
    step_timeout: float = 10.0
    expected: str | None = None  # isolation specs: expected output (file, or directory of NAME.out)
    servers: ServerChoice = field(default_factory=ServerChoice)
    interrupt: Any = None  # the ExitGuard of a headless run (None: an embedding caller)

    @property
    def interrupted(self) -> bool:
        return self.interrupt is not None and bool(self.interrupt.fired)


@dataclass
class BenchOptions:
    """``lockrace bench`` (holder vs waiter, or ``--overhead``)."""

    engine: str = "postgres"
    runs: int = 30
    hold_ms: int | None = None
    budget_ms: int | None = None
    modes: str | None = None
    overhead: bool = False
    json: bool = False
    servers: ServerChoice = field(default_factory=ServerChoice)
