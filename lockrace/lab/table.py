"""Rich tables and JSON for the lab's results."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from .holder_waiter import LabResult
from .stats import fmt_ms


def lab_table(result: LabResult) -> Table:
    cfg = result.config
    table = Table(
        title=f"Holder vs waiter on {result.server_name}: hold {cfg.hold_ms} ms, {cfg.runs} runs per mode "
              f"(after {cfg.warmup} warm-up)",
        title_justify="left",
    )
    table.add_column("Mode", no_wrap=True)
    table.add_column("median ms", justify="right", no_wrap=True)
    table.add_column("min", justify="right", no_wrap=True)
    table.add_column("max", justify="right", no_wrap=True)
    table.add_column(f"lock errors / {cfg.runs}", justify="right", no_wrap=True)
    table.add_column("budget applied", justify="right")
    for mr in result.modes.values():
        s = mr.summary
        budget = "" if mr.applied_budget_ms is None else f"{mr.applied_budget_ms:g} ms"
        errors = Text(str(s.errors), style="bold red" if mr.problems else "")
        table.add_row(mr.mode.label, fmt_ms(s.median_ms), fmt_ms(s.min_ms), fmt_ms(s.max_ms), errors, budget)
    return table


def lab_notes(result: LabResult) -> list[str]:
    lines = []
    ratio = result.ratio()
    if ratio is not None:
        label, value = ratio
        default = result.modes["default"].summary.median_ms
        bounded = default / value
        lines.append(f"{value:.1f}x default / bounded wall ({fmt_ms(default)} / {fmt_ms(bounded)} ms, {label})")
    for mr in result.modes.values():
        if mr.budget_note:
            lines.append(mr.budget_note)
        for problem in mr.problems[:3]:
            lines.append(f"unexpected: {problem}")
        if len(mr.problems) > 3:
            lines.append(f"unexpected: ... {len(mr.problems) - 3} more runs of {mr.mode.label}")
    return lines


def lab_json(result: LabResult) -> dict:
    cfg = result.config
    return {
        "engine": result.engine,
        "flavor": result.flavor,
        "server_version": result.server_version,
        "runs": cfg.runs,
        "warmup": cfg.warmup,
        "hold_ms": cfg.hold_ms,
        "budget_ms": cfg.budget_ms,
        "modes": {
            key: {
                **mr.summary.as_dict(),
                "label": mr.mode.label,
                "statement": mr.mode.sql,
                "before": list(mr.mode.session_setup) + ["BEGIN", *mr.mode.prepare],
                "budget_applied_ms": mr.applied_budget_ms,
                "unexpected": mr.problems,
                "waits_ms": [round(w, 3) for w in mr.waits_ms],
            }
            for key, mr in result.modes.items()
        },
    }


def overhead_table(result) -> Table:
    from .overhead import WAY_LABELS, WAYS

    table = Table(
        title=f"Engine overhead on {result.server_name}: {result.runs} runs per way (after {result.warmup} warm-up),"
              f" interleaved; raw = {result.driver}; over {result.transport or 'the same connection kind'}",
        title_justify="left",
    )
    table.add_column("Wait", no_wrap=True)
    table.add_column("through", no_wrap=True)
    table.add_column("median ms", justify="right", no_wrap=True)
    table.add_column("min", justify="right", no_wrap=True)
    table.add_column("max", justify="right", no_wrap=True)
    table.add_column(f"lock errors / {result.runs}", justify="right", no_wrap=True)
    for cr in result.cases.values():
        for way in WAYS:
            s = cr.summary(way)
            if not s.runs:
                continue  # raw_async: PostgreSQL only
            table.add_row(cr.case.label if way == "raw" else "", WAY_LABELS[way], f"{s.median_ms:.2f}",
                          f"{s.min_ms:.2f}", f"{s.max_ms:.2f}", str(s.errors))
    return table


def overhead_notes(result) -> list[str]:
    from .overhead import CALLER_SLACK_MS

    lines = []
    for cr in result.cases.values():
        raw, wall = cr.summary("raw").median_ms, cr.summary("engine_wall").median_ms
        inner = cr.summary("engine").median_ms
        verdict = "met" if cr.met("engine_wall") else "MISSED"
        line = (f"{cr.case.label}: a caller waits {wall:.2f} ms through Race.run, {raw:.2f} ms through the bare"
                f" driver: overhead {wall - raw:+.2f} ms; target <= raw + {CALLER_SLACK_MS:g} ms ="
                f" {cr.target_ms:.2f} ms: {verdict} (the statement's own time, send to answer: {inner:.2f} ms")
        settled = cr.summary("engine_settled")
        if settled.runs and settled.median_ms - wall >= 0.01:
            line += f"; until the session is free again: {settled.median_ms:.2f} ms"
        line += ")"
        lines.append(line)
        aio = cr.summary("raw_async")
        if aio.runs:
            # what any asyncio caller pays: the same driver, awaited on an event loop
            lines.append(f"  the bare driver awaited on an asyncio loop (AsyncConnection): {aio.median_ms:.2f} ms"
                         f" ({aio.median_ms - raw:+.2f} ms); lockrace beyond that: {wall - aio.median_ms:+.2f} ms")
    return lines


def overhead_json(result) -> dict:
    from .overhead import WAYS

    return {
        "engine": result.engine,
        "flavor": result.flavor,
        "server_version": result.server_version,
        "runs": result.runs,
        "warmup": result.warmup,
        "driver": result.driver,
        "transport": result.transport,
        "cases": {
            key: {
                "label": cr.case.label,
                "budget_ms": cr.case.budget_ms,
                "target_ms": round(cr.target_ms, 3),
                "target": "caller's wall (Race.run) median <= raw median + 0.1 ms",
                "caller_overhead_ms": round(cr.overhead_ms(), 3),
                "target_met": cr.met("engine_wall"),
                **{way: cr.summary(way).as_dict() for way in WAYS if cr.summary(way).runs},
            }
            for key, cr in result.cases.items()
        },
        "targets_met": result.targets_met(),
    }
