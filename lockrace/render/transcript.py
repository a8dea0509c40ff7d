"""A scenario run as a transcript in the seeds' style.

    A> SELECT id FROM accounts WHERE id = 1 FOR UPDATE;
     id
    ----
      1
    (1 row)
    B> SELECT id FROM accounts WHERE id = 1 FOR UPDATE NOWAIT;
    ERROR: 55P03: could not obtain lock on row in relation "accounts"
    -- refused in 0.4 ms

Lines starting with ``--`` are lockrace's own annotations: waits (who
blocked whom, for how long, against which budget), outcomes and skips.
"""

from __future__ import annotations

from ..engine.runner import Entry, RunReport
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


def ms(ns: int) -> str:
    value = ns / 1e6
    return f"{value:.1f} ms" if value < 1000 else f"{value / 1000:.2f} s"


def budget_amount(budget) -> str:
    """'100 ms', '1 s'; empty for no budget or a zero one (NOWAIT)."""
    if budget is None or budget.ms == 0:
        return ""
    return f"{budget.ms:g} ms" if budget.ms < 1000 else f"{budget.ms / 1000:g} s"


def budget_text(budget) -> str:
    if budget is None:
        return ""
    amount = budget_amount(budget)
    return f"{budget.name} {amount}" if amount else budget.name


def entry_lines(entry: Entry, flavor: str) -> list[str]:
    if entry.kind == "note":
        return [f"-- {line}" if line else "--" for line in entry.text.splitlines()]
    rec = entry.record
    if entry.kind == "launch":
        step = rec.step
        first, *rest = step.sql.splitlines()
        lines = [f"{step.session}> {first}"] + rest
        if step.comment:
            lines[-1] += f"  -- {step.comment}"
        return lines
    if entry.kind == "blocked":
        lock = f" on {entry.lock.describe()}" if entry.lock else ""
        who = ", ".join(entry.blockers) or "another transaction"
        return [f"-- {rec.step.session} is blocked by {who}{lock}"]
    if entry.kind == "problem":
        return [f"-- problem: {entry.text}"]
    # finish
    res = rec.result
    lines: list[str] = []
    if rec.was_blocked and rec.launched_before_finish != rec.index:
        lines.append(f"{rec.step.session}> <... completed step {rec.step.name}>")
    lines.extend(result_lines(res, flavor))
    notes = []
    if res.outcome != "ok":
        word = OUTCOME_WORDS.get(res.outcome, res.outcome)
        if res.outcome == "skipped":
            whose = f" locked by {', '.join(res.skipped_from)}" if res.skipped_from else ""
            word = f"skipped {res.skipped_rows} row{'s' if res.skipped_rows != 1 else ''}{whose}"
        if res.outcome == "recovery_conflict" and res.detail:
            word += f" ({res.detail.rstrip('.')})"  # the server's reason: a lock, a snapshot, ...
        if res.conflict:
            word += f" ({res.conflict}{f' on {res.node}' if res.node else ''})"
        notes.append(f"{word} after {ms(res.elapsed_ns)}")
    if rec.was_blocked:
        who = ", ".join(rec.blockers) or "another transaction"
        notes.append(f"waited {ms(res.waited_ns)} blocked by {who}")
    if res.budget is not None and (rec.was_blocked or res.outcome in ("timed_out", "refused", "statement_timeout",
                                                                    "recovery_conflict")):
        notes.append(f"budget {budget_text(res.budget)}")
    if notes:
        lines.append("-- " + "; ".join(notes))
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
