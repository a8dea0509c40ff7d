"""Check a finished step against the scenario's expectations."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..registry import flavor_matches
from ..scenario.model import AcrossSteps, Expectation, Step
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
        return got in [w.strip() for w in str(want).split("|")], f"{got}{detail}"
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
        # every blocker the server reported while this step waited, not only the last set
        seen = tuple(dict.fromkeys(res.blockers_seen + record.blockers))
        ok = record.was_blocked and all(n in seen for n in names)
        got = f"blocked by {', '.join(seen)}" if record.was_blocked else "never reported blocked"
        return ok, got
    if key == "rows_exactly":
        if res.truncated:  # lockrace kept only the first rows: the whole set cannot be compared
            return False, f"{res.total_rows} rows, more than lockrace keeps"
        rows = [[cell(v) for v in r] for r in res.rows]
        shown = "; ".join(" | ".join(r) for r in rows) if rows else ("no rows" if res.has_rows else "no result set")
        return rows == want, f"rows {shown}" if rows else shown
    if key == "notice":
        said = [n for r in (res.result_sets or [res]) for n in r.notices] or list(res.notices)
        said = list(dict.fromkeys(said + list(res.notices)))
        ok = any(str(want).lower() in n.lower() for n in said)
        return ok, ("; ".join(said) if said else "no notice or warning")
    if key == "lock":
        kinds = [_lock_kind(lock) for lock in (res.locks_seen or ((res.lock,) if res.lock else ()))]
        if not kinds:
            return False, "never reported waiting on a lock"
        return want in kinds, "a wait on " + ", ".join(dict.fromkeys(f"{k} ({lock.describe()})" for k, lock in
                                                                     zip(kinds, res.locks_seen or (res.lock,))))
    if key == "took":
        budget = res.budget.ms if res.budget is not None else None
        took = f"took {res.elapsed_ms:.1f} ms"
        if want.relative and budget is None:
            return False, f"{took} and no wait budget was in force"
        ok = want.holds(res.elapsed_ms, budget)
        return ok, f"{took} (budget {res.budget.name} = {budget:g} ms)" if want.relative else took
    if key == "completes_after":
        ok = record.launched_before_finish >= int(want)
        return ok, f"finished after step {record.launched_before_finish}"
    if key == "txn":
        return record.txn_after == want, record.txn_after or "unknown"
    if key == "skipped":
        return res.skipped_rows == want, str(res.skipped_rows)
    return False, f"unknown expectation {key}"


_LOCK_KIND = {"tuple": "row", "record": "row", "table": "relation"}


def _lock_kind(lock) -> str:
    """The ``lock:`` word for a lock the server reported: row, relation, virtualxid, ..."""
    return _LOCK_KIND.get(lock.kind, lock.kind)


def check_across(across: list[AcrossSteps], records: list[StepRecord], flavor: str) -> list[str]:
    """Expectations across steps (``one-of: 5, 7 expect deadlock``): exactly one of the
    named steps ended with that outcome."""
    failures = []
    by_name = {rec.step.name: rec for rec in records}
    for exp in across:
        if not flavor_matches(exp.flavor, flavor):
            continue
        got = {name: (by_name[name].result.outcome if name in by_name and by_name[name].result else "not run")
               for name in exp.steps}
        hits = [name for name, outcome in got.items() if outcome == exp.outcome]
        if len(hits) != 1:
            shown = ", ".join(f"step {name} {outcome}" for name, outcome in got.items())
            failures.append(f"expected exactly one of steps {', '.join(exp.steps)} to end {exp.outcome}, got {shown}")
    return failures


def _short(sql: str, width: int = 72) -> str:
    flat = " ".join(sql.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"
