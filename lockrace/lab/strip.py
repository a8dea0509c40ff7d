"""A strip of individual waits on a log time axis, as plain data (the app's
lab screen draws it; tests check it without Textual).

Waits span four orders of magnitude (NOWAIT ~0.3 ms, default ~500 ms), so the
axis is logarithmic: every run lands in one cell, and a cell shows how many
runs landed there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

DENSITY = " ·∙•●"  # 0, 1, 2, 3-4, 5+ runs in a cell


@dataclass(frozen=True)
class Axis:
    lo_ms: float
    hi_ms: float
    width: int

    def cell(self, ms: float) -> int:
        ms = min(max(ms, self.lo_ms), self.hi_ms)
        span = math.log10(self.hi_ms) - math.log10(self.lo_ms)
        x = (math.log10(ms) - math.log10(self.lo_ms)) / span
        return min(self.width - 1, int(x * self.width))

    def ticks(self) -> list[tuple[int, str]]:
        out = []
        exp = math.ceil(math.log10(self.lo_ms))
        while 10**exp <= self.hi_ms:
            value = 10**exp
            label = f"{value:g}" if value < 1000 else f"{value / 1000:g}s"
            out.append((self.cell(value), label))
            exp += 1
        return out


def axis_for(hold_ms: float, width: int) -> Axis:
    """From 0.1 ms to a little beyond the hold (the longest possible wait)."""
    return Axis(0.1, max(hold_ms * 1.5, 10.0), max(10, width))


def counts(waits_ms: list[float], axis: Axis) -> list[int]:
    cells = [0] * axis.width
    for w in waits_ms:
        cells[axis.cell(w)] += 1
    return cells


def density(n: int) -> str:
    if n <= 0:
        return DENSITY[0]
    if n == 1:
        return DENSITY[1]
    if n == 2:
        return DENSITY[2]
    if n <= 4:
        return DENSITY[3]
    return DENSITY[4]


def tick_line(axis: Axis) -> str:
    line = [" "] * (axis.width + 6)
    for pos, label in axis.ticks():
        for i, ch in enumerate(label):
            if pos + i < len(line):
                line[pos + i] = ch
    return "".join(line).rstrip() + "  ms"
