"""SQL text as the server reads it: tokens with comments skipped, statements split
at the semicolons that end them, string literals and quoted names decoded.

Pure functions, no I/O.  This is what lockrace uses wherever it must know what a
statement *is* rather than what its text contains: a word inside a comment or a
string literal is never a keyword here (``SELECT 1 /* PREPARE TRANSACTION 'x' */``
prepares nothing).

Two dialects: ``postgres`` (nested ``/* */`` comments, ``"name"``, ``E'..'``,
``U&'..'``, ``$tag$..$tag$``; backslashes are plain characters in ``'..'``, as
with standard_conforming_strings on) and ``mysql`` (MariaDB and MySQL: ``#``
comments, backquoted names, ``'..'`` and ``".."`` strings with backslash escapes,
``/*! .. */`` comments whose contents the server runs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

WORD, NAME, STRING, NUMBER, OP, PARAM, SEMI = "word", "name", "string", "number", "op", "param", ";"


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # WORD (keyword or bare name), NAME (quoted name), STRING, NUMBER, OP, PARAM, SEMI
    value: str  # WORD: upper-cased; NAME: the name; STRING: the decoded text; else the text
    start: int
    end: int

    def is_word(self, *words: str) -> bool:
        return self.kind == WORD and self.value in words


class SQLTextError(ValueError):
    """The text ends inside a comment, a string literal or a quoted name."""


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "0": "\0", "Z": "\x1a"}


def tokens(sql: str, dialect: str = "postgres") -> Iterator[Token]:
    """The tokens of ``sql``, comments and white space left out."""
    mysql = dialect != "postgres"
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c.isspace():
            i += 1
        elif c == "-" and sql.startswith("--", i) and (not mysql or i + 2 >= n or sql[i + 2] in " \t\r\n"):
            j = sql.find("\n", i)
            i = n if j < 0 else j + 1
        elif c == "#" and mysql:
            j = sql.find("\n", i)
            i = n if j < 0 else j + 1
        elif c == "/" and sql.startswith("/*", i):
            if mysql and sql.startswith("/*!", i) or mysql and sql.startswith("/*M!", i):
                # an executable comment: the server runs what is inside (after a version number)
                j = i + (3 if sql[i + 2] == "!" else 4)
                while j < n and sql[j].isdigit():
                    j += 1
                end = sql.find("*/", j)
                if end < 0:
                    raise SQLTextError("the text ends inside a comment")
                for tok in tokens(sql[j:end], dialect):
                    yield Token(tok.kind, tok.value, tok.start + j, tok.end + j)
                i = end + 2
                continue
            i = _skip_block_comment(sql, i, nested=not mysql)
        elif c == ";":
            yield Token(SEMI, ";", i, i + 1)
            i += 1
        elif c == "'":
            text, j = _quoted(sql, i, "'", backslash=mysql)
            yield Token(STRING, text, i, j)
            i = j
        elif c == '"':
            text, j = _quoted(sql, i, '"', backslash=mysql)
            yield Token(STRING if mysql else NAME, text, i, j)
            i = j
        elif c == "`" and mysql:
            text, j = _quoted(sql, i, "`", backslash=False)
            yield Token(NAME, text, i, j)
            i = j
        elif c == "$" and not mysql and (tag := _dollar_tag(sql, i)) is not None:
            end = sql.find(tag, i + len(tag))
            if end < 0:
                raise SQLTextError("the text ends inside a dollar-quoted string")
            yield Token(STRING, sql[i + len(tag):end], i, end + len(tag))
            i = end + len(tag)
        elif c in "eE" and not mysql and sql.startswith("'", i + 1):
            text, j = _quoted(sql, i + 1, "'", backslash=True)
            yield Token(STRING, text, i, j)
            i = j
        elif c in "uU" and not mysql and sql.startswith("&'", i + 1):
            text, j = _quoted(sql, i + 2, "'", backslash=False)
            yield Token(STRING, text, i, j)  # \XXXX escapes are left as written
            i = j
        elif c in "bBxXnN" and i + 1 < n and sql[i + 1] == "'":
            text, j = _quoted(sql, i + 1, "'", backslash=mysql and c in "nN")
            yield Token(STRING, text, i, j)
            i = j
        elif c.isdigit() or (c == "." and i + 1 < n and sql[i + 1].isdigit()):
            j = i
            while j < n and (sql[j].isalnum() or sql[j] in "._" or (sql[j] in "+-" and sql[j - 1] in "eE")):
                j += 1
            yield Token(NUMBER, sql[i:j], i, j)
            i = j
        elif c.isalpha() or c == "_" or ord(c) > 127:
            j = i
            while j < n and (sql[j].isalnum() or sql[j] in "_$" or ord(sql[j]) > 127):
                j += 1
            yield Token(WORD, sql[i:j].upper(), i, j)
            i = j
        elif c == "$" and not mysql and i + 1 < n and sql[i + 1].isdigit():
            j = i + 1
            while j < n and sql[j].isdigit():
                j += 1
            yield Token(PARAM, sql[i:j], i, j)
            i = j
        else:
            j = i + 1
            if sql[i:i + 2] in ("::", "<=", ">=", "<>", "!=", ":=", "||", "->", "=>"):
                j = i + 2
            yield Token(OP, sql[i:j], i, j)
            i = j


def _skip_block_comment(sql: str, i: int, nested: bool) -> int:
    depth, j, n = 0, i, len(sql)
    while j < n:
        if sql.startswith("/*", j):
            depth = depth + 1 if nested or depth == 0 else depth
            j += 2
        elif sql.startswith("*/", j):
            depth -= 1
            j += 2
            if depth == 0:
                return j
        else:
            j += 1
    raise SQLTextError("the text ends inside a comment")


def _quoted(sql: str, i: int, quote: str, backslash: bool) -> tuple[str, int]:
    """The text of the quoted run starting at ``sql[i]`` (a doubled quote is one) and where it ends."""
    out: list[str] = []
    j, n = i + 1, len(sql)
    while j < n:
        c = sql[j]
        if backslash and c == "\\" and j + 1 < n:
            nxt = sql[j + 1]
            out.append(_ESCAPES.get(nxt, nxt))
            j += 2
        elif c == quote:
            if j + 1 < n and sql[j + 1] == quote:
                out.append(quote)
                j += 2
            else:
                return "".join(out), j + 1
        else:
            out.append(c)
            j += 1
    raise SQLTextError("the text ends inside a quoted string or name")


def _dollar_tag(sql: str, i: int) -> str | None:
    j = i + 1
    while j < len(sql) and (sql[j].isalnum() or sql[j] == "_"):
        j += 1
    if j < len(sql) and sql[j] == "$" and not sql[i + 1:j][:1].isdigit():
        return sql[i:j + 1]
    return None


def statements(sql: str, dialect: str = "postgres") -> list[list[Token]]:
    """The statements of ``sql`` as the server splits them, each a list of tokens
    (empty statements left out).  PostgreSQL's ``BEGIN ATOMIC ... END`` bodies are
    kept whole."""
    out: list[list[Token]] = []
    current: list[Token] = []
    atomic = 0
    for tok in tokens(sql, dialect):
        if tok.kind == SEMI and not atomic:
            if current:
                out.append(current)
            current = []
            continue
        if tok.kind == WORD and tok.value == "ATOMIC" and current and current[-1].is_word("BEGIN"):
            atomic += 1
        elif atomic and tok.kind == WORD and tok.value == "END" and not (current and current[-1].kind == SEMI):
            atomic -= 1
        current.append(tok)
    if current:
        out.append(current)
    return out


def try_statements(sql: str, dialect: str = "postgres") -> list[list[Token]] | None:
    """``statements``, or None when the text cannot be read (unterminated string or comment)."""
    try:
        return statements(sql, dialect)
    except SQLTextError:
        return None


def words(stmt: list[Token], count: int = 4) -> tuple[str, ...]:
    """The statement's first ``count`` bare words (upper-cased), stopping at anything else."""
    out: list[str] = []
    for tok in stmt:
        if tok.kind != WORD or len(out) == count:
            break
        out.append(tok.value)
    return tuple(out)


def has_call(stmt: list[Token]) -> bool:
    """Whether the statement calls a function (a name followed by ``(``) or a
    sequence-style pseudo column (MariaDB ``NEXT VALUE FOR``)."""
    for a, b in zip(stmt, stmt[1:]):
        if a.kind in (WORD, NAME) and b.kind == OP and b.value == "(" and not a.is_word(*_NOT_CALLS):
            return True
        if a.is_word("NEXT", "PREVIOUS") and b.is_word("VALUE"):
            return True
    return False


# words followed by "(" that are syntax, not calls
_NOT_CALLS = frozenset({
    "IN", "VALUES", "AS", "FROM", "JOIN", "ON", "USING", "WHERE", "AND", "OR", "NOT", "EXISTS", "ANY", "ALL",
    "SOME", "SELECT", "OVER", "FILTER", "WITHIN", "OF", "BY", "LATERAL", "INTO", "TABLE", "WITH", "UNION",
    "INTERSECT", "EXCEPT", "ROW", "ARRAY", "IS", "BETWEEN", "LIKE", "ILIKE", "THEN", "ELSE", "WHEN", "CASE",
    "LIMIT", "OFFSET", "RETURNING", "SET", "HAVING", "GROUP", "ORDER", "DISTINCT", "NULLS", "FIRST", "LAST",
    "ASC", "DESC", "LOCKED", "NOWAIT", "SKIP", "UPDATE", "SHARE", "KEY", "NO", "FOR", "TO", "=",
})
