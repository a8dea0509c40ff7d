"""The waiter's modes in the holder-vs-waiter race, per engine, and the checks
on the arguments (hold must outlast the budget; MySQL budgets in whole seconds).

Measured on MariaDB 10.11 (see tests/engine/test_lab.py): ``WAIT n`` keeps only the
whole seconds of n (WAIT 0.1 and WAIT 0.9 refuse at once like WAIT 0; WAIT 1.5
waits 1 s), and ``SET innodb_lock_wait_timeout = 0.5`` is rejected with error
1232, so the MySQL family's bounded waits come in whole seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..dialects import dialect_for

TABLE = "lab_rows"
HOLD_SQL = f"SELECT id FROM {TABLE} WHERE id = 1 FOR UPDATE"

ALL_MODES = ("default", "timeout", "wait", "nowait", "skip_locked")
HOLD_MARGIN_MS = 50  # the hold must exceed the bounded wait by at least this much


class LabError(Exception):
    """Arguments or a server answer that make the measurement meaningless."""


@dataclass(frozen=True)
class Mode:
    key: str  # default | timeout | wait | nowait | skip_locked
    label: str  # what the table shows: "lock_timeout=100ms"
    sql: str  # the timed statement
    prepare: tuple[str, ...] = ()  # in the waiter's transaction, before the timed statement
    session_setup: tuple[str, ...] = ()  # once before this mode's runs
    session_reset: tuple[str, ...] = ()  # once after them
    expect: str = "wait"  # wait: gets row 1 after the hold; error: fails every run; claim: gets row 2 at once
    budget_ms: float | None = None  # the bounded wait asked for

    @property
    def bounded(self) -> bool:
        return self.key in ("timeout", "wait")


@dataclass
class LabConfig:
    engine: str  # postgres | mysql
    flavor: str  # postgres | mariadb | mysql8
    runs: int = 30
    hold_ms: int = 500
    budget_ms: int = 100
    modes: tuple[str, ...] = ()
    warmup: int = 3
    plan: list[Mode] = field(default_factory=list)


def default_modes(flavor: str) -> tuple[str, ...]:
    wait = ("wait",) if dialect_for(flavor).statement_wait_n else ()
    return ("default", "timeout", *wait, "nowait", "skip_locked")


def parse_modes(text: str | None, flavor: str) -> tuple[str, ...]:
    if not text:
        return default_modes(flavor)
    modes = tuple(m.strip().lower().replace("-", "_") for m in text.split(",") if m.strip())
    unknown = [m for m in modes if m not in ALL_MODES]
    if unknown or not modes:
        raise LabError(f"unknown mode {', '.join(unknown) or '(none)'}; choose from {','.join(ALL_MODES)}")
    if "wait" in modes and not dialect_for(flavor).statement_wait_n:
        raise LabError("mode 'wait' (SELECT ... FOR UPDATE WAIT n) exists only on MariaDB")
    return tuple(dict.fromkeys(modes))


def make_config(engine: str, flavor: str, runs: int, hold_ms: int | None, budget_ms: int | None,
                modes: str | None, warmup: int = 3) -> LabConfig:
    """Check the arguments and build the plan; LabError says what is wrong."""
    dialect = dialect_for(flavor)
    default_hold, default_budget = dialect.bench_defaults
    hold = default_hold if hold_ms is None else hold_ms
    budget = default_budget if budget_ms is None else budget_ms
    if runs < 1:
        raise LabError("--runs must be at least 1")
    if hold <= 0:
        raise LabError("--hold-ms must be positive")
    chosen = parse_modes(modes, flavor)
    if any(m in ("timeout", "wait") for m in chosen):
        if budget <= 0:
            raise LabError("--budget-ms must be positive (0 means no limit at all)")
        if dialect.row_lock_whole_seconds and "timeout" in chosen and budget % 1000:
            raise LabError(
                f"{dialect.row_lock_setting} takes whole seconds (the server rejects {budget / 1000:g} with error 1232):"
                f" give --budget-ms as a multiple of 1000, e.g. --budget-ms 1000"
                + (", or --modes default,wait,nowait to see what WAIT n does with a fraction"
                   if dialect.statement_wait_n else "")
            )
        if hold < budget + HOLD_MARGIN_MS:
            raise LabError(
                f"the hold ({hold} ms) must outlast the bounded wait ({budget} ms) by at least {HOLD_MARGIN_MS} ms,"
                f" or the bounded waiter gets the row instead of timing out: raise --hold-ms to"
                f" {budget + HOLD_MARGIN_MS} or more, or lower --budget-ms"
            )
    cfg = LabConfig(engine, flavor, runs, hold, budget, chosen, warmup)
    cfg.plan = [build_mode(m, cfg) for m in chosen]
    return cfg


def build_mode(key: str, cfg: LabConfig) -> Mode:
    row1 = f"SELECT id FROM {TABLE} WHERE id = 1 FOR UPDATE"
    dialect = dialect_for(cfg.flavor)
    setting = dialect.row_lock_setting
    if key == "default":
        setup: tuple[str, ...] = ()
        reset: tuple[str, ...] = ()
        if dialect.row_lock_budget_by_default:
            # the server's own default (50 s) is fine unless the hold is longer
            secs = max(50, math.ceil(cfg.hold_ms / 1000) + 10)
            setup = (dialect.set_sql(setting, secs * 1000),)
            reset = (dialect.reset_sql(setting),)
        return Mode("default", "default FOR UPDATE", row1, session_setup=setup, session_reset=reset)
    if key == "nowait":
        return Mode("nowait", "FOR UPDATE NOWAIT", row1 + " NOWAIT", expect="error")
    if key == "skip_locked":
        return Mode("skip_locked", "SKIP LOCKED (next free row)",
                    f"SELECT id FROM {TABLE} ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED", expect="claim")
    budget = cfg.budget_ms
    if key == "timeout":
        if dialect.transactional_settings:  # set for the waiter's transaction only
            return Mode("timeout", f"{setting}={budget}ms", row1,
                        prepare=(dialect.set_sql(setting, budget, local=True),), expect="error", budget_ms=budget)
        secs = budget // 1000
        return Mode("timeout", f"{setting}={secs}", row1,
                    session_setup=(dialect.set_sql(setting, secs * 1000),),
                    session_reset=(dialect.reset_sql(setting),),
                    expect="error", budget_ms=budget)
    if key == "wait":
        wait = f"{budget / 1000:g}"
        return Mode("wait", f"FOR UPDATE WAIT {wait}", f"{row1} WAIT {wait}", expect="error", budget_ms=budget)
    raise LabError(f"unknown mode {key}")
