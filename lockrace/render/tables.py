"""Result sets as text, psql's aligned style (transcripts use it)."""

from __future__ import annotations

import re

from ..dialects import dialect_for

_NUMBER = re.compile(r"^-?\d+(\.\d+)?$")


def _cell(value) -> str:
    return "" if value is None else str(value)


def row_count_line(shown: int, total: int) -> str:
    """psql's '(3 rows)'; '(first 200 of 2,000,000 rows)' when only the first rows were kept."""
    if total > shown:
        return f"(first {shown:,} of {total:,} rows)"
    return f"({total} row{'s' if total != 1 else ''})"


def aligned(columns: list[str], rows: list[tuple], total: int | None = None) -> list[str]:
    """psql-style table: centred headers, numbers right-aligned, a row count
    (``total`` when the result had more rows than ``rows`` keeps)."""
    texts = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in texts]) for i, c in enumerate(columns)]
    numeric = [bool(texts) and all(_NUMBER.match(r[i]) or r[i] == "" for r in texts) for i in range(len(columns))]
    header = " | ".join(c.center(w) for c, w in zip(columns, widths))
    lines = [" " + header.rstrip() if header.strip() else "", "-" + "-+-".join("-" * w for w in widths) + "-"]
    for r in texts:
        cells = [v.rjust(w) if num else v.ljust(w) for v, w, num in zip(r, widths, numeric)]
        lines.append((" " + " | ".join(cells)).rstrip())
    lines.append(row_count_line(len(rows), len(rows) if total is None else max(total, len(rows))))
    return lines


def result_lines(result, flavor: str) -> list[str]:
    """What a client would print for one finished statement."""
    dialect = dialect_for(flavor)
    if result.code or (result.failed and result.message):
        return [error_line(result, flavor)]
    out: list[str] = []
    for rs in result.result_sets or [result]:
        if rs.has_rows:
            if dialect.empty_result and not rs.rows:
                out.append(dialect.empty_result)
            else:
                out.extend(aligned(rs.columns, rs.rows, rs.total_rows))
        elif rs.tag:
            out.append(rs.tag)
    return out


def error_line(result, flavor: str) -> str:
    """The error as the server's own client prints it (psql, mysql)."""
    return dialect_for(flavor).error_text(result.code, result.message, result.severity, result.sqlstate)
