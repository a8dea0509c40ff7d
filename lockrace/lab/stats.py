"""Summaries of measured waits: median, min, max, error count."""

from __future__ import annotations

import statistics
from dataclasses import dataclass


@dataclass(frozen=True)
class Summary:
    median_ms: float
    min_ms: float
    max_ms: float
    errors: int
    runs: int

    def as_dict(self) -> dict:
        return {
            "median_ms": round(self.median_ms, 3),
            "min_ms": round(self.min_ms, 3),
            "max_ms": round(self.max_ms, 3),
            "errors": self.errors,
            "runs": self.runs,
        }


def summarize(waits_ms: list[float], errors: int) -> Summary:
    if not waits_ms:
        return Summary(0.0, 0.0, 0.0, errors, 0)
    return Summary(statistics.median(waits_ms), min(waits_ms), max(waits_ms), errors, len(waits_ms))


def fmt_ms(ms: float) -> str:
    """Three significant figures, the way the bench table prints them: 441, 114, 13.3, 0.42."""
    if ms >= 100:
        return f"{ms:.0f}"
    if ms >= 10:
        return f"{ms:.1f}"
    return f"{ms:.2f}"
