"""A scenario run as JSON (``lockrace run --format json``)."""

from __future__ import annotations

from ..engine.scheduler import RunReport


def report_dict(report: RunReport, origin: str = "") -> dict:
    steps = []
    for rec in report.records:
        res = rec.result
        item: dict[str, object] = {
            "step": rec.step.name,
            "session": rec.step.session,
            "sql": rec.step.sql,
            "outcome": res.outcome if res else None,
            "problem": rec.problem or None,
            "failures": rec.failures,
        }
        if res is not None:
            item.update({
                "code": res.code or None,
                "message": res.message or None,
                "tag": res.tag or None,
                "columns": res.columns if res.has_rows else None,
                "rows": [list(r) for r in res.rows] if res.has_rows else None,  # the first ROW_LIMIT
                "row_count": res.total_rows if res.has_rows else None,
                "elapsed_ms": round(res.elapsed_ns / 1e6, 3),
                "waited_ms": round(res.waited_ns / 1e6, 3),
                "blocked": rec.was_blocked,
                "blocked_by": list(rec.blockers),
                "lock": res.lock.describe() if res.lock else None,
                "budget": {"name": res.budget.name, "ms": res.budget.ms} if res.budget else None,
                "skipped_rows": res.skipped_rows,
                "skipped_from": list(res.skipped_from),
                # a refusal: who held the lock per the lock views right after it (null: they could not tell)
                "held_by": list(res.held_by) if res.held_by is not None else None,
                "txn_after": rec.txn_after,
                # lockrace's plain words: a deadlock's cycle as the server told it, a COMMIT that rolled back
                "explained": list(res.explained),
                "cycle": list(res.cycle) if res.cycle else None,  # a deadlock victim: the cycle, victim first
            })
            if res.node:  # cluster runs: where the statement ran, and why a cluster failure happened
                item.update({"node": res.node, "conflict": res.conflict or None})
        steps.append(item)
    return {
        "scenario": report.scenario.name,
        "title": report.scenario.title,
        "flavor": report.flavor,
        "server": report.server,
        "origin": origin,
        "passed": report.passed,
        "failures": report.failures,
        "wall_ms": round(report.wall_ns / 1e6, 3),
        "steps": steps,
    }
