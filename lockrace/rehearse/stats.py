"""What the bystanders' measurements say: percentiles, when the queue formed and
drained, and the longest wait in progress over time (the chart)."""

from __future__ import annotations

import math
from dataclasses import dataclass

QUEUE_MS = 20.0
"""A bystander statement that started while a migration attempt was on the server
and waited longer than this is counted as queued behind the migration."""


@dataclass(frozen=True)
class Waits:
    statements: int
    errors: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    per_s: float  # statements answered per second over the traffic's whole time


def percentile(sorted_ms: list[float], q: float) -> float:
    """Nearest-rank percentile of already sorted values (0 for none)."""
    if not sorted_ms:
        return 0.0
    rank = max(1, math.ceil(q / 100 * len(sorted_ms)))
    return sorted_ms[min(rank, len(sorted_ms)) - 1]


def summarize(starts_ns, waits_ns, errors: int, span_ns: int) -> Waits:
    ms = sorted(w / 1e6 for w in waits_ns)
    per_s = len(ms) / (span_ns / 1e9) if span_ns > 0 else 0.0
    return Waits(len(ms), errors, percentile(ms, 50), percentile(ms, 99), ms[-1] if ms else 0.0, per_s)


@dataclass(frozen=True)
class Queue:
    queued: int  # statements that waited behind an attempt
    formed_ns: int | None  # since the rehearsal's origin: the first such statement's start
    drained_ns: int | None  # ... the last such statement's answer
    during_max_ms: float = 0.0  # the longest wait of a statement that started while an attempt was on


def queue(starts_ns, waits_ns, attempts, threshold_ms: float = QUEUE_MS) -> Queue:
    windows = sorted((a.start_ns, a.end_ns) for a in attempts)
    if not windows:
        return Queue(0, None, None)
    limit = threshold_ms * 1e6
    lo, hi = windows[0][0], windows[-1][1]
    count, formed, drained, during = 0, None, None, 0
    for s, w in zip(starts_ns, waits_ns):
        if s < lo or s > hi or not any(a <= s <= b for a, b in windows):
            continue
        during = max(during, w)
        if w <= limit:
            continue
        count += 1
        formed = s if formed is None or s < formed else formed
        end = s + w
        drained = end if drained is None or end > drained else drained
    return Queue(count, formed, drained, during / 1e6)


def in_progress(starts_ns, waits_ns, t0_ns: int, bucket_ns: int, columns: int) -> list[float | None]:
    """For each column of ``bucket_ns`` from ``t0_ns``: the longest any bystander statement
    had been waiting within it, in ms (None: no statement in that column)."""
    out: list[float | None] = [None] * columns
    end_ns = t0_ns + bucket_ns * columns
    for s, w in zip(starts_ns, waits_ns):
        e = s + w
        if e < t0_ns or s >= end_ns:
            continue
        first = max(0, (s - t0_ns) // bucket_ns)
        last = min(columns - 1, (e - t0_ns) // bucket_ns)
        for c in range(first, last + 1):
            col_end = t0_ns + (c + 1) * bucket_ns
            age = (min(e, col_end) - s) / 1e6
            cur = out[c]
            if cur is None or age > cur:
                out[c] = age
    return out
