"""What a rehearsal shows: the policies side by side, a chart of the bystanders'
waits over time with the migration's attempts marked, and one verdict
sentence per policy."""

from __future__ import annotations

import math

from rich.table import Table
from rich.text import Text

from ..lab.stats import fmt_ms
from .rehearsal import PolicyResult

LEVELS = "▁▂▃▄▅▆▇█"
CHART_COLUMNS = 60
FLOOR_MS = 1.0  # the chart's lowest level: a wait this short or shorter


def seconds(ms: float) -> str:
    """2.0 s, 130 ms, 0.42 ms."""
    if ms >= 1000:
        return f"{ms / 1000:.1f} s"
    return f"{fmt_ms(ms)} ms"


def table(results: list[PolicyResult], title: str, caption: str = "") -> Table:
    t = Table(title=title, title_justify="left", caption=caption or None, caption_justify="left")
    t.add_column("policy", no_wrap=True)
    t.add_column("migration", no_wrap=True)
    t.add_column("attempts", justify="right")
    t.add_column("took", justify="right", no_wrap=True)
    t.add_column("statements", justify="right")
    t.add_column("errors", justify="right")
    t.add_column("p50", justify="right", no_wrap=True)
    t.add_column("p99", justify="right", no_wrap=True)
    t.add_column("max wait", justify="right", no_wrap=True)
    t.add_column("max behind migration", justify="right", no_wrap=True)
    t.add_column("queue formed → drained", no_wrap=True)
    for r in results:
        m, w, q = r.migration, r.waits, r.queue
        outcome = Text(m.outcome, style="green" if m.outcome == "done" else "bold red")
        if q.queued and m.start_ns is not None and q.formed_ns is not None and q.drained_ns is not None:
            window = f"+{seconds((q.formed_ns - m.start_ns) / 1e6)} → +{seconds((q.drained_ns - m.start_ns) / 1e6)}"
        else:
            window = "no queue"
        t.add_row(r.policy.name, outcome, str(len(m.attempts)), seconds(m.ms), str(w.statements),
                  Text(str(w.errors), style="bold red" if w.errors else ""),
                  f"{fmt_ms(w.p50_ms)} ms", f"{fmt_ms(w.p99_ms)} ms", seconds(w.max_ms),
                  seconds(q.during_max_ms) if m.attempts else "", window)
    return t


def chart(results: list[PolicyResult], columns: int = CHART_COLUMNS) -> list[str]:
    """One block per policy on a shared time axis (from the first statement to the
    longest rehearsal's end) and a shared log scale of the longest wait in progress."""
    from .stats import in_progress

    if not results:
        return []
    span = max(r.end_ns for r in results) or 1
    bucket = max(1, -(-span // columns))
    series = [in_progress(r.starts_ns, r.waits_ns, 0, bucket, columns) for r in results]
    top = max((v for s in series for v in s if v is not None), default=FLOOR_MS)
    top = max(top, FLOOR_MS * 10)
    width = max(len(r.policy.name) for r in results)
    width = max(width, 8)

    def level(v: float | None) -> str:
        if v is None:
            return " "
        if v <= FLOOR_MS:
            return LEVELS[0]
        frac = math.log10(v / FLOOR_MS) / math.log10(top / FLOOR_MS)
        return LEVELS[min(len(LEVELS) - 1, max(0, round(frac * (len(LEVELS) - 1))))]

    def col(ns: int) -> int:
        return min(columns - 1, max(0, ns // bucket))

    lines = [f"longest bystander wait in progress, every {seconds(bucket / 1e6)} "
             f"(log scale: {LEVELS[0]} {seconds(FLOOR_MS)} or less, {LEVELS[-1]} {seconds(top)})"]
    for r, s in zip(results, series):
        lines.append(f"{r.policy.name:<{width}}  {''.join(level(v) for v in s)}")
        marks = [" "] * columns
        if r.hold_from_ns is not None:
            until = r.hold_until_ns if r.hold_until_ns is not None else r.end_ns
            for c in range(col(r.hold_from_ns), col(until) + 1):
                marks[c] = "░"
        for a in r.migration.attempts:
            for c in range(col(a.start_ns), col(a.end_ns) + 1):
                marks[c] = "─"
        for a in r.migration.attempts:
            marks[col(a.end_ns)] = {"landed": "✓", "lock_timeout": "x"}.get(a.outcome, "!")
        lines.append(f"{'':<{width}}  {''.join(marks)}")
    lines.append(f"{'':<{width}}  ░ long transaction  ─ migration attempt  x budget ran out  ✓ landed  ! failed")
    return lines


def verdict(r: PolicyResult, engine: str) -> str:
    m, w, q = r.migration, r.waits, r.queue
    how = r.policy.describe(engine)
    how = how[0].upper() + how[1:]
    behind = q.during_max_ms
    if q.queued:
        waited = f"bystanders waited up to {seconds(behind)} behind the migration"
        if r.remaining_ms is not None and behind >= 0.8 * r.remaining_ms:
            waited += f" (the long transaction had {seconds(r.remaining_ms)} left when it started)"
        else:
            waited += f" ({q.queued} statement{'s' if q.queued != 1 else ''} queued behind its attempts)"
    else:
        waited = f"no bystander queued behind the migration (none waited more than {seconds(behind)} while it ran)"
    elsewhere = ""
    if w.max_ms > max(behind * 1.5, behind + 50):
        elsewhere = f"; the longest bystander wait ({seconds(w.max_ms)}) came at another time, not behind the migration"
    n = len(m.attempts)
    if m.outcome == "done" and m.steps > 1:
        landed = f"the migration's {m.steps} statements landed one by one after {n} attempts in all, {seconds(m.ms)}"
        if r.hold_until_ns is not None and m.end_ns is not None and m.end_ns >= r.hold_until_ns:
            landed += ", once the long transaction had ended"
    elif m.outcome == "done":
        landed = f"the migration landed on attempt {n} after {seconds(m.ms)}" if n > 1 else \
            f"the migration landed on its first attempt after {seconds(m.ms)}"
        if r.hold_until_ns is not None and m.end_ns is not None and m.end_ns >= r.hold_until_ns and n > 1:
            landed += ", once the long transaction had ended"
    else:
        landed = f"the migration failed after {n} attempt{'s' if n != 1 else ''} ({seconds(m.ms)}): {m.reason}"
    errors = f"; {w.errors} bystander statements failed" if w.errors else ""
    return f"{how}, {waited}, and {landed}{errors}{elsewhere}."
