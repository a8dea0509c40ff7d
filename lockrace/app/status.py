"""What a session panel's badge says, derived only from engine events.

Pure data, no Textual: the panel keeps a ``SessionStatus`` per session,
feeds it every event for that session and asks it for badges.  Every state
has a text label *and* a style, so color is never the only signal.
"""

from __future__ import annotations

import re

from dataclasses import dataclass
from time import perf_counter_ns

from ..core.events import (
    Budget,
    Event,
    LockInfo,
    SessionState,
    StatementBlocked,
    StatementFinished,
    StatementResult,
    StatementStarted,
    StatementUnblocked,
)
from rich.cells import cell_len
from rich.text import Text

from ..render.transcript import OUTCOME_WORDS, budget_amount, duration_words, names_text
from .palette import StyleTable

# badge key -> (label, style); the label may be extended with details
STYLES = StyleTable({
    "idle": "bold $lr-on-badge on $lr-idle",
    "in transaction": "bold $lr-on-badge on $lr-in-txn",
    "failed transaction": "bold white on $lr-failed-txn",
    "running": "bold $lr-on-badge on $lr-running",
    "blocked": "bold $lr-on-badge on $lr-blocked",
    "timed out": "bold white on $lr-timed-out-badge",
    "statement timeout": "bold white on $lr-timed-out-badge",
    "refused": "bold white on $lr-refused-badge",
    "skipped": "bold $lr-on-badge on $lr-skipped",
    "deadlock victim": "bold white on $lr-deadlock-badge",
    "cancelled": "bold $lr-on-badge on $lr-cancelled",
    "error": "bold white on $lr-error-badge",
    "connection lost": "bold white on $lr-lost-badge",
    "certification conflict": "bold $lr-on-badge on $lr-conflict",
    "recovery conflict": "bold white on $lr-recovery-badge",
    "ok": "bold $lr-on-badge on $lr-ok",
    "connecting": "bold $lr-on-badge on $lr-idle",
})


STATE_HELP = [
    ("idle", "no transaction open; each statement commits on its own (autocommit)"),
    ("in transaction", "BEGIN ran; locks taken so far are held until COMMIT or ROLLBACK"),
    ("failed transaction", "PostgreSQL: an error aborted the transaction; only ROLLBACK helps"),
    ("running", "the statement is on the server and not (yet) reported waiting"),
    ("blocked", "the server reports the statement waiting for a lock another session holds"),
    ("timed out", "the wait budget (lock_timeout / innodb_lock_wait_timeout / WAIT n) ran out"),
    ("statement timeout", "statement_timeout / max_statement_time ended the statement"),
    ("refused", "NOWAIT (or WAIT 0): the lock was not free, so the server refused at once; the badge names\n"
                "who held it, as the server's lock views told right after (or says they could not tell)"),
    ("skipped", "SKIP LOCKED passed over rows other sessions hold locked"),
    ("deadlock victim", "the server broke a lock cycle by failing this statement"),
    ("cancelled", "cancelled on request (the cancel key, or a scenario step timeout)"),
    ("error", "any other error the server returned"),
    ("connection lost", "the session's connection is gone; reset or switch engine to reconnect"),
    ("certification conflict", "Galera: another node committed a conflicting write first (1213 at COMMIT, "
                               "or a brute-force abort); the node's wsrep counters say which, not the message"),
    ("recovery conflict", "PostgreSQL hot standby: replay needed what this query held (40001 "
                          "\"conflict with recovery\")"),
]


def seconds(ns: float) -> str:
    s = ns / 1e9
    if s < 1:
        return f"{ns / 1e6:.0f} ms"
    if s >= 120:
        return duration_words(round(s) * 1000)
    return f"{s:.1f} s"


def lock_words(lock: LockInfo, room: int = 0) -> str:
    """``lock.describe()`` in ``room`` cells (0: all of it): what gives way is the
    relation and row, never the mode ('accounts row (index PRIMA…) X,REC_NOT_GAP')."""
    text = lock.describe()
    if not room or cell_len(text) <= room:
        return text
    mode = lock.mode
    if mode and text.endswith(" " + mode):
        if cell_len(mode) + 2 > room:
            return mode  # the mode alone (cut at its end only if even it does not fit)
        what = Text(text[: -len(mode) - 1])
        what.truncate(room - cell_len(mode) - 1, overflow="ellipsis")
        return f"{what.plain} {mode}"
    cut = Text(text)
    cut.truncate(room, overflow="ellipsis")
    return cut.plain


def budget_words(budget: Budget | None) -> str:
    if budget is None:
        return ""
    amount = budget_amount(budget)
    return f"{amount} {budget.name}" if amount else budget.name


_FOREIGN = re.compile(r"^another client \((.+)\)$")


def badge_names(names) -> str:
    """``names_text`` for a panel's badge, which an 80-column terminal cuts at ~36
    characters: a client outside the race is "client pid 23509" there (the
    transcript keeps "another client (pid 23509)")."""
    return names_text(_FOREIGN.sub(r"client \1", name) for name in names)


@dataclass
class Running:
    stmt_id: int
    sql: str
    started_ns: int
    budget: Budget | None
    blocked_since: int | None = None
    blockers: tuple[str, ...] = ()
    lock: LockInfo | None = None


@dataclass
class Badge:
    key: str
    label: str
    short: str = ""  # what must stay of ``label`` where a panel's line is narrow ("": all of it)

    @property
    def style(self) -> str:
        return STYLES.get(self.key, STYLES["idle"])


@dataclass
class SessionStatus:
    name: str
    txn: str = "connecting"
    running: Running | None = None
    last: StatementResult | None = None
    budgets: tuple[Budget, ...] = ()
    ident: int = 0
    statements: int = 0

    def apply(self, event: Event) -> None:
        if isinstance(event, StatementStarted):
            self.running = Running(event.stmt_id, event.sql, event.t_ns, event.budget)
            self.last = None
            self.statements += 1
        elif isinstance(event, StatementBlocked):
            if self.running and self.running.stmt_id == event.stmt_id:
                if self.running.blocked_since is None:
                    self.running.blocked_since = event.t_ns
                self.running.blockers = event.blockers
                self.running.lock = event.lock
                if event.budget is not None:  # a metadata-lock wait: lock_wait_timeout bounds it
                    self.running.budget = event.budget
        elif isinstance(event, StatementUnblocked):
            if self.running and self.running.stmt_id == event.stmt_id:
                self.running.blocked_since = None
        elif isinstance(event, StatementFinished):
            if self.running and self.running.stmt_id == event.stmt_id:
                self.running = None
            self.last = event.result
        elif isinstance(event, SessionState):
            self.txn = event.txn
            self.budgets = event.budgets
            self.ident = event.ident

    # ------------------------------------------------------------ badges
    def activity(self) -> Badge | None:
        """What the current or last statement is doing / did (None: nothing to say)."""
        run = self.running
        if run is not None:
            if run.blocked_since is not None:
                who = badge_names(run.blockers)
                on = f" on {run.lock.describe()}" if run.lock else ""
                return Badge("blocked", f"BLOCKED by {who}{on}", f"BLOCKED by {who}")
            return Badge("running", "running")
        res = self.last
        if res is None:
            return None
        key = OUTCOME_WORDS.get(res.outcome, res.outcome)
        if res.outcome == "ok":
            return None
        if res.outcome == "skipped":
            whose = f" locked by {badge_names(res.skipped_from)}" if res.skipped_from else ""
            n = res.skipped_rows
            rows = f"skipped {n} row{'s' if n != 1 else ''}"
            return Badge("skipped", f"{rows}{whose}", rows)
        label, short = key, ""
        if res.outcome == "refused":
            if res.held_by:
                label = f"refused: {badge_names(res.held_by)} {'holds' if len(res.held_by) == 1 else 'hold'} the lock"
            else:
                label = "refused: holder gone" if res.held_by == () else "refused: holder unknown"
        if res.outcome == "timed_out" and res.budget is not None:
            label, short = f"timed out ({budget_words(res.budget)})", "timed out"
        elif res.outcome == "recovery_conflict" and res.budget is not None:
            # a hot standby: replay waited that long for it
            label, short = f"{key} ({budget_words(res.budget)})", key
        return Badge(key, label, short)

    def transaction(self) -> Badge:
        if self.txn == "failed transaction":
            return Badge("failed transaction", "failed transaction (ROLLBACK needed)", "ROLLBACK needed")
        if self.txn == "closed" or (self.last is not None and self.last.outcome == "connection_lost"):
            return Badge("connection lost", "connection lost")
        if self.txn == "idle" and self.running is not None:
            return Badge("idle", "autocommit (no transaction)", "autocommit")
        if self.txn in ("in transaction", "idle", "connecting"):
            return Badge(self.txn, "connecting…" if self.txn == "connecting" else self.txn)
        return Badge("idle", self.txn)

    def wait_line(self, now_ns: int | None = None) -> str:
        """'waiting 1.2 s of 2 s lock_timeout budget' while blocked, else ''."""
        run = self.running
        if run is None or run.blocked_since is None:
            return ""
        now = now_ns or perf_counter_ns()
        waited = (now - run.started_ns) / 1e9
        # tenths while they matter; whole seconds on long waits (fewer repaints)
        shown = f"{waited:.1f} s" if waited < 10 else f"{int(waited)} s"
        who = badge_names(run.blockers)
        if run.budget is None or run.budget.ms == 0:
            return f"waiting {shown}, no budget: waits until {who} {'end' if len(run.blockers) > 1 else 'ends'}"
        return f"waiting {shown} of {budget_words(run.budget)} budget"
