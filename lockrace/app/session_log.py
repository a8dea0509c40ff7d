"""One session's transcript and status, kept whether or not a panel shows it.

An isolation spec may have more sessions than the four panels; the app keeps
a ``SessionLog`` per session, feeds it every event of that session, and a
panel showing the session draws from it (and redraws it in full when the
user switches which sessions are shown).
"""

from __future__ import annotations

from collections import deque

from ..core.events import Event, StatementExplained, StatementFinished, StatementStarted
from ..render.tables import result_lines
from ..render.transcript import annotation, explained_lines
from .status import SessionStatus
from .palette import StyleTable, themed

OUTCOME_LINE_STYLES = StyleTable({
    "ok": "$lr-ok",
    "skipped": "$lr-skipped",
    "timed_out": "bold $lr-timed-out",
    "statement_timeout": "bold $lr-timed-out",
    "refused": "bold $lr-refused",
    "deadlock": "bold $lr-deadlock",
    "cancelled": "$lr-cancelled",
    "error": "$lr-error",
    "connection_lost": "bold $lr-lost",
    "certification_conflict": "bold $lr-conflict",
    "recovery_conflict": "bold $lr-recovery",
})


SESSION_LOG_LINES = 5000
# A result's rows and header: a panel draws them unwrapped (a wide result scrolls sideways
# rather than wrapping into columns nobody can read).  A style that draws as plain text.
TABLE_STYLE = "none"


class SessionLog:
    def __init__(self, name: str, flavor: str = "postgres"):
        self.name = name
        self.flavor = flavor
        self.node = ""  # cluster races: the node this session sits on
        self.status = SessionStatus(name)
        # (line, style), the latest SESSION_LOG_LINES: a day of typing stays bounded in memory
        self.entries: deque[tuple[str, str]] = deque(maxlen=SESSION_LOG_LINES)
        self.next_text: str | None = None  # the next scenario step, when it is this session's
        self._unexplained: int | None = None  # a refused statement whose holder is still being asked

    @property
    def lines(self) -> list[str]:
        return [line for line, _ in self.entries]

    def write(self, line: str, style: str = "") -> tuple[str, str]:
        entry = (line, style)
        self.entries.append(entry)
        return entry

    def apply(self, event: Event) -> list[tuple[str, str]]:
        """Take one of this session's events; returns the transcript lines it adds."""
        self.status.apply(event)
        added: list[tuple[str, str]] = []
        write = lambda line, style="": added.append(self.write(line, style))  # noqa: E731
        if isinstance(event, StatementStarted):
            first, *rest = event.sql.splitlines() or [""]
            write(f"{self.name}> {first}", "bold")
            for line in rest:
                write(f"   {line}", "bold")
        elif isinstance(event, StatementFinished):
            res = event.result
            error = bool(res.code) or (res.failed and bool(res.message))
            for line in result_lines(res, self.flavor):
                write(line, OUTCOME_LINE_STYLES.get(res.outcome, "") if error else TABLE_STYLE)
            for notice in res.notices:
                write(notice, themed("italic $lr-muted"))
            if res.outcome in ("refused", "deadlock"):
                self._unexplained = event.stmt_id  # its line names the holder / the cycle: written once the server told
            else:
                self._annotate(res, write)
        elif isinstance(event, StatementExplained) and event.stmt_id == self._unexplained:
            self._unexplained = None
            self._annotate(event.result, write)
        return added

    @staticmethod
    def _annotate(res, write) -> None:
        note = annotation(res, was_blocked=bool(res.waited_ns or res.blocked_by), blockers=res.blocked_by, always=True)
        write(note, OUTCOME_LINE_STYLES.get(res.outcome, "dim"))
        for line in explained_lines(res):  # a deadlock's cycle, a COMMIT that rolled back, ...
            write(line, OUTCOME_LINE_STYLES.get(res.outcome, "dim"))
