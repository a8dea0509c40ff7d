"""Check a finished step against the scenario's expectations."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..scenario.model import Expectation, Step
from ..core.events import REPLAY_ALIAS, REPLAY_PROCESS, StatementResult


@dataclass
class StepRecord:
    """What happened to one step of a scenario run."""

    step: Step
    index: int  # position in the run order, 1-based
    result: StatementResult | None = None
    was_blocked: bool = False
    blockers: tuple[str, ...] = ()
    launched_before_finish: int = 0  # how many steps had been launched when it finished
    txn_after: str = ""
    failures: list[str] = field(default_factory=list)
    problem: str = ""  # runner-level problem: did not block / never finished / cancelled


def cell(value) -> str:
    return "NULL" if value is None else str(value)


def check(record: StepRecord, expectations: list[Expectation]) -> list[str]:
    """Human-readable failures, one per unmet expectation (empty = all met)."""
    res = record.result
    failures: list[str] = []
    if res is None:
        return [f"step {record.step.name} ({record.step.session}) did not finish: {record.problem}"]
    for exp in expectations:
        ok, got = _one(exp, record)
        if not ok:
            failures.append(f"step {record.step.name} ({record.step.session}> {_short(record.step.sql)}): "
                            f"expected {exp.describe()}, got {got}")
    if res.outcome == "connection_lost" and not any(e.key == "outcome" for e in expectations):
        # a lost connection is never a silent success: only a step that says it
        # expects one (expect: connection_lost) may end that way
        why = f": {res.message}" if res.message else ""
        failures.append(f"step {record.step.name} ({record.step.session}> {_short(record.step.sql)}): "
                        f"lost its connection to the server{why}")
    if record.problem:
        failures.append(f"step {record.step.name} ({record.step.session}): {record.problem}")
    return failures


def _one(exp: Expectation, record: StepRecord) -> tuple[bool, str]:
    res = record.result
    assert res is not None
    key, want = exp.key, exp.value
    if key == "outcome":
        got = res.outcome
        detail = f" ({res.code}: {res.message})" if res.code else ""
        return got == want, f"{got}{detail}"
    if key == "code":
        return res.code == str(want), res.code or "no error"
    if key == "message":
        return res.message == want, repr(res.message) if res.message else "no message"
    if key == "rows":
        n = res.total_rows if res.has_rows else None
        return n == want, "no result set" if n is None else str(n)
    if key == "row":
        rows = [[cell(v) for v in r] for r in res.rows]
        return want in rows, "rows " + "; ".join(" | ".join(r) for r in rows) if rows else "no rows"
    if key == "tag":
        return res.tag == want, repr(res.tag)
    if key == "blocked_by":
        names = [n for n in re.split(r"[,\s]+", str(want)) if n]
        if names == ["nobody"]:  # the server never reported this step waiting
            return not record.was_blocked, f"blocked by {', '.join(record.blockers) or 'another transaction'}" \
                if record.was_blocked else "never reported blocked"
        names = [REPLAY_PROCESS if n == REPLAY_ALIAS else n for n in names]
        ok = record.was_blocked and all(n in record.blockers for n in names)
        got = f"blocked by {', '.join(record.blockers)}" if record.was_blocked else "never reported blocked"
        return ok, got
    if key == "completes_after":
        ok = record.launched_before_finish >= int(want)
        return ok, f"finished after step {record.launched_before_finish}"
    if key == "txn":
        return record.txn_after == want, record.txn_after or "unknown"
    if key == "skipped":
        return res.skipped_rows == want, str(res.skipped_rows)
    return False, f"unknown expectation {key}"


def _short(sql: str, width: int = 72) -> str:
    flat = " ".join(sql.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"
