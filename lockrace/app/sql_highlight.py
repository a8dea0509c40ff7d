"""SQL syntax highlighting for the input line and the multi-line editor: keywords,
strings, numbers, comments and quoted names, by a small scanner (no grammar needed:
it only colours, it never decides anything)."""

from __future__ import annotations

import re

from rich.highlighter import Highlighter
from rich.text import Text

from .palette import StyleTable

KEYWORDS = frozenset("""
ABORT ADD ALL ALTER ANALYZE AND ANY AS ASC BEGIN BETWEEN BY CASCADE CASE CHECK COLUMN COMMIT
CONSTRAINT CREATE CROSS DEFAULT DELETE DESC DISTINCT DO DROP ELSE END EXCLUSIVE EXISTS EXPLAIN FETCH
FIRST FLUSH FOR FOREIGN FROM FULL GRANT GROUP HAVING IF IN INDEX INNER INSERT INTERVAL INTO IS
ISOLATION JOIN KEY LEFT LEVEL LIKE LIMIT LOCAL LOCK LOCKED MODE NEXT NO NOT NOWAIT NULL OF OFFSET ON
ONLY OR ORDER OUTER PREPARE PRIMARY READ REFERENCES RELEASE REPEATABLE RESET RETURNING RIGHT ROLLBACK
ROW ROWS SAVEPOINT SELECT SERIALIZABLE SESSION SET SHARE SHOW SKIP START STATEMENT TABLE TABLES THEN
TO TRANSACTION TRUNCATE UNION UNIQUE UNLOCK UPDATE USING VALUES WAIT WHEN WHERE WITH WORK WRITE XA
COMMITTED UNCOMMITTED ACCESS INT INTEGER TEXT VARCHAR BIGINT SERIAL BOOLEAN TRUE FALSE ENGINE
""".split())

_TOKEN = re.compile(r"""
    (?P<comment>--[^\n]*|/\*.*?(?:\*/|$))
  | (?P<string>'(?:[^']|'')*(?:'|$))
  | (?P<name>"(?:[^"]|"")*(?:"|$)|`[^`]*(?:`|$))
  | (?P<number>\b\d+(?:\.\d+)?\b)
  | (?P<word>\b[A-Za-z_][A-Za-z_0-9$]*\b)
""", re.VERBOSE | re.DOTALL)

STYLES = StyleTable({
    "keyword": "bold $lr-sql-keyword",
    "string": "$lr-sql-string",
    "number": "$lr-sql-number",
    "comment": "italic $lr-sql-comment",
    "name": "$lr-sql-name",
})


def sql_spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, kind) of what is coloured, kind one of STYLES's keys."""
    out = []
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup or ""  # every alternative of _TOKEN is a named group
        if kind == "word":
            if m.group().upper() not in KEYWORDS:
                continue
            kind = "keyword"
        out.append((m.start(), m.end(), kind))
    return out


class SqlHighlighter(Highlighter):
    """For an Input: colours its text in place."""

    def highlight(self, text: Text) -> None:
        for start, end, kind in sql_spans(text.plain):
            text.stylize(STYLES[kind], start, end)
