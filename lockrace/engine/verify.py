"""Check a finished step against the scenario's expectations."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core.events import StatementResult
from ..registry import flavor_matches
from ..scenario.expectations import KEYS
from ..scenario.model import AcrossSteps, Expectation, Step


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
    spec = KEYS.get(exp.key)
    if spec is None:
        return False, f"unknown expectation {exp.key}"
    return spec.check(exp.value, record)


def check_across(across: list[AcrossSteps], records: list[StepRecord], flavor: str) -> list[str]:
    """Expectations across steps (``one-of: 5, 7 expect deadlock``): exactly one of the
    named steps ended with that outcome."""
    failures = []
    by_name = {rec.step.name: rec for rec in records}
    for exp in across:
        if not flavor_matches(exp.flavor, flavor):
            continue
        got = {name: _outcome_of(by_name.get(name)) for name in exp.steps}
        hits = [name for name, outcome in got.items() if outcome == exp.outcome]
        if len(hits) != 1:
            shown = ", ".join(f"step {name} {outcome}" for name, outcome in got.items())
            failures.append(f"expected exactly one of steps {', '.join(exp.steps)} to end {exp.outcome}, got {shown}")
    return failures


def _outcome_of(record: StepRecord | None) -> str:
    return record.result.outcome if record is not None and record.result is not None else "not run"


def _short(sql: str, width: int = 72) -> str:
    flat = " ".join(sql.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"
