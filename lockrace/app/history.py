"""Statement history kept across runs, one file per engine (as psql keeps
~/.psql_history): Up in a panel's input line brings back what was typed in
earlier runs too.  ``lockrace`` keeps it in $XDG_STATE_HOME/lockrace
(~/.local/state/lockrace), or in $LOCKRACE_HISTORY_DIR; LOCKRACE_HISTORY_DIR=""
keeps none.  Each line of a file is one statement as JSON (a statement may
span lines)."""

from __future__ import annotations

import json
import os
from pathlib import Path

HISTORY_ENV = "LOCKRACE_HISTORY_DIR"
KEEP = 1000  # statements kept per engine


def default_dir() -> Path | None:
    if HISTORY_ENV in os.environ:
        value = os.environ[HISTORY_ENV]
        return Path(value).expanduser() if value else None
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "lockrace"


class History:
    """The statements typed on one engine, oldest first; ``add`` appends to the file."""

    def __init__(self, directory: Path | None, engine: str):
        self.engine = engine
        self.path = directory / f"history-{engine}" if directory is not None else None
        self.entries: list[str] = []
        self._load()

    def _load(self) -> None:
        if self.path is None:
            return
        try:
            text = self.path.read_text(encoding="utf-8")
        except OSError:
            return
        for line in text.splitlines():
            try:
                value = json.loads(line)
            except ValueError:
                continue  # a line of something else: left out
            if isinstance(value, str) and value:
                self.entries.append(value)
        self.entries = self.entries[-KEEP:]

    def add(self, sql: str) -> bool:
        """Remember ``sql`` (not twice in a row); True: it is new, ``save`` writes it."""
        if not sql or (self.entries and self.entries[-1] == sql):
            return False
        self.entries.append(sql)
        return True

    def save(self, sql: str) -> None:
        """Append ``sql`` to the file (file I/O: run it off the app's loop)."""
        if self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if len(self.entries) > KEEP * 2:  # now and then, the file is cut back to what is kept
                self.entries = self.entries[-KEEP:]
                self.path.write_text("".join(json.dumps(e) + "\n" for e in self.entries), encoding="utf-8")
            else:
                with self.path.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(sql) + "\n")
        except OSError:
            self.path = None  # a history that cannot be written is kept for this run only
