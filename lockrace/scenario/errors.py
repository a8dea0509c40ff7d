"""The one error every scenario reader raises for input it cannot use."""

from __future__ import annotations

from pathlib import Path


class ScenarioError(Exception):
    """A malformed scenario or spec file; prints as ``file:line: what is wrong``."""

    def __init__(self, path: str | Path | None, line: int | None, message: str):
        self.path = str(path) if path is not None else "<input>"
        self.line = line
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line is not None else self.path
        return f"{where}: {self.message}"


def read_source(path: str | Path) -> str:
    """A scenario or spec file's text, or ScenarioError saying why not."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioError(path, None, f"not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise ScenarioError(path, None, f"cannot read: {exc.strerror or exc}") from None
