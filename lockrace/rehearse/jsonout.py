"""``lockrace rehearse --json``: one object per policy, in the order rehearsed.

{"policies": [{"policy": "...",
               "migration": {"outcome": "done", "attempts": 3, "ms": 2310.5},
               "bystanders": {"statements": 4200, "errors": 0, "p50_ms": 0.4, "p99_ms": 95.0, "max_ms": 130.2}},
              ...]}
"""

from __future__ import annotations

from .rehearsal import PolicyResult


def _ms(value: float) -> float:
    return round(value, 1) if value >= 1 else round(value, 3)


def policy_dict(r: PolicyResult) -> dict:
    m, w = r.migration, r.waits
    return {
        "policy": r.policy.name,
        "migration": {"outcome": m.outcome, "attempts": len(m.attempts), "ms": _ms(m.ms)},
        "bystanders": {"statements": w.statements, "errors": w.errors, "p50_ms": _ms(w.p50_ms),
                       "p99_ms": _ms(w.p99_ms), "max_ms": _ms(w.max_ms)},
    }


def report_dict(results: list[PolicyResult]) -> dict:
    return {"policies": [policy_dict(r) for r in results]}
