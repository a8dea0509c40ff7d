"""A race as a transcript: statements, psql-style results, lockrace's annotations.

    A> SELECT id FROM accounts WHERE id = 1 FOR UPDATE;
     id
    ----
      1
    (1 row)
    B> SELECT id FROM accounts WHERE id = 1 FOR UPDATE NOWAIT;
    ERROR: 55P03: could not obtain lock on row in relation "accounts"
    -- refused after 0.4 ms; lock held by A

Lines starting with ``--`` are lockrace's own annotations: waits (who
blocked whom, for how long, against which budget), outcomes and skips.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core.events import LockInfo, StatementResult
from ..core.lockwords import wait_words
from ..engine.scheduler import Entry, EntryKind, RunReport
from ..engine.verify import StepRecord, check
from ..scenario.model import Scenario
from .tables import result_lines

OUTCOME_WORDS = {
    "ok": "ok",
    "timed_out": "timed out",
    "refused": "refused",
    "skipped": "skipped",
    "deadlock": "deadlock victim",
    "statement_timeout": "statement timeout",
    "cancelled": "cancelled",
    "error": "error",
    "connection_lost": "connection lost",
    "certification_conflict": "certification conflict",
    "recovery_conflict": "recovery conflict",
}


def names_text(names, nobody: str = "another transaction") -> str:
    """Sessions as English: 'A', 'B and C', 'B, C and D' (``nobody`` when none is known)."""
    names = list(names)
    if not names:
        return nobody
    if len(names) == 1:
        return names[0]
    return f"{', '.join(names[:-1])} and {names[-1]}"


def holder_words(result) -> str:
    """After a refusal, who held the lock, as far as the server's lock views told right after it."""
    if result.outcome != "refused":
        return ""
    if result.held_by is None:
        return "the server's lock views cannot tell who holds the lock"
    if not result.held_by:
        return "the lock views showed no holder any more"
    return f"lock held by {names_text(result.held_by)}"


def ms(ns: int) -> str:
    value = ns / 1e6
    return f"{value:.1f} ms" if value < 1000 else f"{value / 1000:.2f} s"


_UNITS = [("year", 365 * 86400_000), ("day", 86400_000), ("h", 3600_000), ("min", 60_000)]


def duration_words(ms_value: float) -> str:
    """A duration as a learner reads it: '100 ms', '50 s', '5 min', '1 h 30 min', '1 day',
    '1 year' (never '86400 s' or '3.1536e+07 s')."""
    if ms_value < 1000:
        return f"{ms_value:g} ms"
    if ms_value < 120_000 and (ms_value < 60_000 or ms_value % 60_000):
        return f"{round(ms_value / 1000, 3):g} s"
    for i, (unit, size) in enumerate(_UNITS):
        if ms_value >= size:
            whole, rest = divmod(ms_value, size)
            words = f"{int(whole)} {unit}" + ("s" if unit in ("year", "day") and whole != 1 else "")
            if rest == 0:
                return words
            if i + 1 < len(_UNITS) and whole < 10:  # 1 h 30 min; past ten of a unit, tenths of it
                smaller, small_size = _UNITS[i + 1]
                if rest % small_size == 0:
                    n = int(rest // small_size)
                    return f"{words} {n} {smaller}" + ("s" if smaller == "day" and n != 1 else "")
            value = round(ms_value / size, 1)
            return f"{value:g} {unit}" + ("s" if unit in ("year", "day") and value != 1 else "")
    return f"{round(ms_value / 1000, 3):g} s"


def budget_amount(budget) -> str:
    """'100 ms', '1 s', '1 day'; empty for no budget or a zero one (NOWAIT)."""
    if budget is None or budget.ms == 0:
        return ""
    return duration_words(budget.ms)


def budget_text(budget) -> str:
    if budget is None:
        return ""
    amount = budget_amount(budget)
    return f"{budget.name} {amount}" if amount else budget.name


def annotation(res: StatementResult, *, was_blocked: bool, blockers, always: bool = False) -> str:
    """lockrace's note after a result, the one writer of it (transcripts, saved races and
    the app's panels): outcome and time, who held a refused lock, the wait and whom it
    waited on, the budget in force.  Empty when there is nothing to say; ``always`` also
    notes a plain success (``-- ok in 0.4 ms``: the app's panels confirm every statement)."""
    notes = []
    if res.outcome != "ok":
        word = OUTCOME_WORDS.get(res.outcome, res.outcome)
        if res.outcome == "skipped":
            whose = f" locked by {names_text(res.skipped_from)}" if res.skipped_from else ""
            word = f"skipped {res.skipped_rows} row{'s' if res.skipped_rows != 1 else ''}{whose}"
        if res.outcome == "recovery_conflict" and res.detail:
            word += f" ({res.detail.rstrip('.')})"  # the server's reason: a lock, a snapshot, ...
        if res.conflict:
            word += f" ({res.conflict}{f' on {res.node}' if res.node else ''})"
        notes.append(f"{word} after {ms(res.elapsed_ns)}")
        if res.outcome == "refused":
            notes.append(holder_words(res))
    elif always:
        notes.append(f"ok in {ms(res.elapsed_ns)}")
    if res.skip_unknown:
        notes.append(f"rows passed over not counted: {res.skip_unknown}")
    if was_blocked:
        notes.append(f"waited {ms(res.waited_ns)} blocked by {names_text(blockers)}")
    if res.budget is not None and (was_blocked or res.outcome in ("timed_out", "refused", "statement_timeout",
                                                                "recovery_conflict")):
        notes.append(f"budget {budget_text(res.budget)}")
    return "-- " + "; ".join(notes) if notes else ""


def explained_lines(res: StatementResult) -> list[str]:
    """lockrace's plain words after the note: a deadlock's cycle as the server told it
    (sessions by name, then ``cycle: A → B → A``), a COMMIT that rolled back, NOWAIT
    behind a table lock (``StatementResult.explained``)."""
    return [f"-- {line}" for line in res.explained]


def entry_lines(entry: Entry, flavor: str) -> list[str]:
    if entry.kind == EntryKind.NOTE:
        return [f"-- {line}" if line else "--" for line in entry.text.splitlines()]
    if entry.kind == EntryKind.PROBLEM:
        return [f"-- problem: {entry.text}"]
    rec = entry.record
    assert rec is not None, f"a {entry.kind} entry is about a step"
    if entry.kind == EntryKind.LAUNCH:
        step = rec.step
        first, *rest = step.sql.splitlines()
        launched = [f"{step.session}> {first}"] + rest
        if step.comment:
            launched[-1] += f"  -- {step.comment}"
        return launched
    if entry.kind == EntryKind.BLOCKED:
        lock = f" on {entry.lock.describe()}" if entry.lock else ""
        who = names_text(entry.blockers)
        meaning = wait_words(entry.lock, list(entry.blockers))  # a row wait, a row's queue: in plain words
        return [f"-- {rec.step.session} is blocked by {who}{lock}{f': {meaning}' if meaning else ''}"]
    # finish
    res = rec.result
    assert res is not None, "a finished step has its result"
    lines = []
    if rec.was_blocked and rec.launched_before_finish != rec.index:
        lines.append(f"{rec.step.session}> <... completed step {rec.step.name}>")
    lines.extend(result_lines(res, flavor))
    lines.extend(res.notices)  # the server's notices and warnings, as psql prints them (MariaDB: SHOW WARNINGS)
    note = annotation(res, was_blocked=rec.was_blocked, blockers=rec.blockers)
    if note:
        lines.append(note)
    lines.extend(explained_lines(res))
    if rec.problem:
        lines.append(f"-- problem: {rec.problem}")
    return lines


def footer(report: RunReport, origin: str = "") -> list[str]:
    where = f"{report.server}{f' ({origin})' if origin else ''}"
    if report.passed:
        return [f"Verified against {where}"]
    lines = [f"FAILED on {where}: {len(report.failures)} expectation(s) not met"]
    lines.extend(f"  - {f}" for f in report.failures)
    return lines


def header(name: str, title: str, server: str, origin: str) -> str:
    """The line a run's transcript opens with."""
    return f"== {name}: {title} ({server}, {origin})"


@dataclass
class Blocked:
    """One report of a statement waiting: when, how many statements had started by then, on whom and what."""

    t_ns: int
    launched: int
    blockers: tuple[str, ...]
    lock: LockInfo | None = None


@dataclass
class Observed:
    """What one statement of a race did, as seen live (the app records these)."""

    result: StatementResult | None
    finished_after: int = 0  # how many statements had started when it finished
    blocks: list[Blocked] = field(default_factory=list)
    txn_after: str = ""


def replay(scenario: Scenario, observed: list[Observed], flavor: str, server: str) -> tuple[list[Entry], RunReport]:
    """The entries ``lockrace run`` emits for ``scenario`` (its steps in order, one per
    observed statement), built from what was observed instead of running it again: the
    same order (a step that completes after step N is collected once N finished; a
    report of waiting comes after the launch it followed), the same records, the same
    expectation checks."""
    report = RunReport(scenario, flavor, server)
    entries: list[Entry] = []
    pending: list[tuple[StepRecord, Observed, int]] = []

    def complete(record: StepRecord, seen: Observed, after: int | None) -> None:
        record.result = seen.result
        record.launched_before_finish = seen.finished_after if after is not None else record.index
        record.was_blocked = record.was_blocked or bool(seen.blocks)
        record.blockers = (seen.result.blocked_by if seen.result else ()) or record.blockers
        record.txn_after = seen.txn_after
        if seen.result is None:
            record.problem = "did not finish"
        record.failures = check(record, record.step.applicable(flavor))
        entries.append(Entry(EntryKind.FINISH, record))

    for index, (step, seen) in enumerate(zip(scenario.steps, observed), start=1):
        if step.note:
            entries.append(Entry(EntryKind.NOTE, text=step.note))
        record = StepRecord(step, index)
        report.records.append(record)
        entries.append(Entry(EntryKind.LAUNCH, record))
        after = [e.value for e in step.applicable(flavor) if e.key == "completes_after" and isinstance(e.value, int)]
        # the runner waits for a step that does not complete later: every report of it comes now
        reports = [(b, record) for b in seen.blocks if b.launched <= index or not after]
        reports += [(b, r) for r, s, _ in pending for b in s.blocks if b.launched == index]
        for b, r in sorted(reports, key=lambda br: br[0].t_ns):
            r.was_blocked = True
            r.blockers = b.blockers
            entries.append(Entry(EntryKind.BLOCKED, r, blockers=b.blockers, lock=b.lock))
        if after:
            pending.append((record, seen, after[0]))
        else:
            complete(record, seen, None)
        for item in [p for p in pending if index >= p[2]]:
            pending.remove(item)
            complete(*item)
    for item in pending:
        complete(*item)
    return entries, report


def run_text(scenario: Scenario, entries: list[Entry], report: RunReport, flavor: str, origin: str) -> str:
    """The whole transcript ``lockrace run`` prints for one run, as one string."""
    lines = [header(scenario.name, scenario.title, report.server, origin)]
    for entry in entries:
        lines.extend(entry_lines(entry, flavor))
    lines.extend(footer(report, origin))
    lines.append("")
    return "\n".join(lines) + "\n"
