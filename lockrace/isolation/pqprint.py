"""Result sets as isolationtester prints them: libpq's PQprint with
header on, align on and ``|`` as field separator.

Rules (libpq fe-print.c, behaviour re-implemented here):
- a column's width is the longest of its name and its values, in bytes;
- a column is "numeric" (right-aligned, name too) unless some non-empty value
  has a character other than digits, ``.``, ``E``, ``e``, space or ``-``,
  starts with ``E``/``e``, or does not end in a digit; NULL and empty values
  do not count, so a column of only NULLs stays numeric;
- other columns are left-aligned and padded, trailing spaces included;
- the rule under the header is dashes per column joined by ``+``;
- then ``(N rows)`` / ``(1 row)`` and an empty line.
A result with no columns prints nothing.
"""

from __future__ import annotations

_NUMERIC_CHARS = frozenset(b"0123456789.Ee -")


def _non_numeric(value: bytes) -> bool:
    last = None
    for ch in value:
        if ch >= 0x80:  # a multibyte character: libpq sees its first byte, not numeric
            return True
        if ch not in _NUMERIC_CHARS:
            return True
        last = ch
    return value[:1] in (b"E", b"e") or last is None or not (0x30 <= last <= 0x39)


def format_result(columns: list[bytes], rows: list[tuple[bytes | None, ...]]) -> bytes:
    ncols = len(columns)
    if ncols == 0:
        return b""
    width = [len(c) for c in columns]
    text_col = [False] * ncols
    for row in rows:
        for j, value in enumerate(row):
            if not value:  # NULL or empty: skipped
                continue
            if not text_col[j] and _non_numeric(value):
                text_col[j] = True
            if len(value) > width[j]:
                width[j] = len(value)

    def cell(j: int, value: bytes) -> bytes:
        pad = b" " * (width[j] - len(value))
        return value + pad if text_col[j] else pad + value

    out = [b"|".join(cell(j, c) for j, c in enumerate(columns))]
    out.append(b"+".join(b"-" * w for w in width))
    for row in rows:
        out.append(b"|".join(cell(j, v or b"") for j, v in enumerate(row)))
    n = len(rows)
    out.append(b"(%d row%s)" % (n, b"" if n == 1 else b"s"))
    out.append(b"")
    return b"\n".join(out) + b"\n"
