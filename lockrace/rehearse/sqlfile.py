"""The files a rehearsal reads: the migration, the setup and the workload.

Statements are split the way the server reads them (core/sqltext.py); the
table a migration changes, and its CONCURRENTLY / ALGORITHM=INSTANT variants,
are read from its tokens, never from a text search.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..dialects import family_dialect
from ..core.sqltext import NAME, OP, WORD, Token, try_statements

DEFAULT_KEYS = 10_000

_DIGITS = "(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 " \
          "UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)"
DEFAULT_SETUP = {
    "postgres": [
        "CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL DEFAULT 0, note text)",
        f"INSERT INTO accounts (id, balance) SELECT g, 100 FROM generate_series(1, {DEFAULT_KEYS}) AS g",
        "ANALYZE accounts",
    ],
    "mysql": [
        "CREATE TABLE accounts (id INT PRIMARY KEY, balance INT NOT NULL DEFAULT 0, note VARCHAR(100)) ENGINE=InnoDB",
        "INSERT INTO accounts (id, balance) SELECT a.d * 1000 + b.d * 100 + c.d * 10 + e.d + 1, 100"
        f" FROM {_DIGITS} a, {_DIGITS} b, {_DIGITS} c, {_DIGITS} e",
        "ANALYZE TABLE accounts",
    ],
}
DEFAULT_WORKLOAD = [
    "SELECT balance FROM accounts WHERE id = :id",
    "UPDATE accounts SET balance = balance + 1 WHERE id = :id",
]
KEY = re.compile(r"(?<![:\w]):id\b")

_TXN_CONTROL = ("BEGIN", "START", "COMMIT", "ROLLBACK", "END", "SAVEPOINT", "RELEASE", "ABORT")


class SqlFileError(ValueError):
    """A file a rehearsal cannot use: one sentence."""


@dataclass(frozen=True)
class Statement:
    text: str
    tokens: tuple[Token, ...]

    @property
    def first(self) -> str:
        return self.tokens[0].value if self.tokens and self.tokens[0].kind == WORD else ""

    def has_word(self, word: str) -> bool:
        return any(t.is_word(word) for t in self.tokens)


def dialect(engine: str) -> str:
    """The SQL lexer (core/sqltext) of ``engine``'s family."""
    return family_dialect(engine).lexer


def read_text(path: str, what: str) -> str:
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise SqlFileError(f"the {what} file {path} does not exist") from None
    except IsADirectoryError:
        raise SqlFileError(f"the {what} file {path} is a directory, not a file") from None
    except OSError as exc:
        raise SqlFileError(f"cannot read the {what} file {path}: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise SqlFileError(f"the {what} file {path} is not UTF-8 text") from None


def split(text: str, engine: str, what: str) -> list[Statement]:
    stmts = try_statements(text, dialect(engine))
    if stmts is None:
        raise SqlFileError(f"the {what} ends inside a string, a quoted name or a comment")
    out = [Statement(text[s[0].start:s[-1].end], tuple(s)) for s in stmts if s]
    if not out:
        raise SqlFileError(f"the {what} has no SQL statement in it")
    return out


def read_migration(path: str, engine: str) -> list[Statement]:
    stmts = split(read_text(path, "migration"), engine, f"migration file {path}")
    for s in stmts:
        if s.first in _TXN_CONTROL or (s.first == "SET" and s.has_word("TRANSACTION")):
            raise SqlFileError(
                f"the migration file {path} has its own {s.first} statement: give only the changes, lockrace "
                "runs them in a transaction of its own per attempt on PostgreSQL (one statement at a time on "
                "MySQL/MariaDB)")
    return stmts


def read_setup(path: str | None, engine: str) -> list[str]:
    if path is None:
        return list(DEFAULT_SETUP[engine])
    return [s.text for s in split(read_text(path, "setup"), engine, f"setup file {path}")]


def read_workload(path: str | None) -> list[str]:
    """One statement a line (blank lines and -- / # comments left out, a final ';' dropped)."""
    if path is None:
        return list(DEFAULT_WORKLOAD)
    lines = []
    for raw in read_text(path, "workload").splitlines():
        line = raw.strip()
        if not line or line.startswith(("--", "#")):
            continue
        lines.append(line[:-1].rstrip() if line.endswith(";") else line)
    if not lines:
        raise SqlFileError(f"the workload file {path} has no statement in it (one statement a line)")
    return lines


def key_parts(statement: str) -> list[str]:
    """The statement cut at each ``:id``: ``str(key).join(parts)`` is the statement for one key."""
    return KEY.split(statement)


# ------------------------------------------------------------------ what the migration touches

def _name_after(toks: tuple[Token, ...], i: int) -> str | None:
    """The (last part of a possibly qualified) name starting at toks[i]."""
    name = None
    while i < len(toks) and toks[i].kind in (WORD, NAME):
        name = toks[i].value.lower() if toks[i].kind == WORD else toks[i].value
        if i + 2 < len(toks) and toks[i + 1].kind == OP and toks[i + 1].value == ".":
            i += 2
            continue
        break
    return name


def target_table(stmt: Statement) -> str | None:
    """The table an ALTER TABLE / CREATE INDEX / TRUNCATE / LOCK / DROP TABLE / RENAME TABLE changes."""
    toks = stmt.tokens
    words = [t.value if t.kind == WORD else "" for t in toks]
    skip = {"IF", "EXISTS", "NOT", "ONLY", "CONCURRENTLY", "TABLE", "IGNORE", "ONLINE"}
    first = words[0] if words else ""
    if first in ("ALTER", "DROP", "RENAME", "OPTIMIZE") and "TABLE" in words[:3] or first in ("TRUNCATE", "LOCK"):
        i = 1
        while i < len(toks) and toks[i].kind == WORD and toks[i].value in skip | {"ALTER", "DROP"}:
            i += 1
        return _name_after(toks, i)
    if first == "CREATE" and ("INDEX" in words[:3] or "TRIGGER" in words[:4]):
        for i, t in enumerate(toks):
            if t.is_word("ON"):
                j = i + 1
                while j < len(toks) and toks[j].is_word("ONLY"):
                    j += 1
                return _name_after(toks, j)
    return None


def tables_in(statement: str, engine: str) -> list[str]:
    """Tables a workload statement reads or writes (after FROM / UPDATE / INTO / JOIN)."""
    stmts = try_statements(statement, dialect(engine)) or []
    out = []
    for stmt in stmts:
        toks = tuple(stmt)
        for i, t in enumerate(toks[:-1]):
            if t.is_word("FROM", "UPDATE", "INTO", "JOIN"):
                name = _name_after(toks, i + 1)
                if name and name.upper() not in ("SELECT", "LATERAL"):
                    out.append(name)
    return out


def transaction_safe(stmts: list[Statement]) -> bool:
    """PostgreSQL: can the statements run inside one transaction block?"""
    return not any(s.has_word("CONCURRENTLY") or s.first in ("VACUUM", "CLUSTER") or
                   (s.first == "CREATE" and s.has_word("DATABASE")) for s in stmts)


# ------------------------------------------------------------------ variants

def _insert_after(stmt: Statement, index: int, text: str) -> Statement:
    tok = stmt.tokens[index]
    body = stmt.text
    base = stmt.tokens[0].start
    cut = tok.end - base
    new = body[:cut] + text + body[cut:]
    return Statement(new, ())


def concurrently(stmt: Statement) -> Statement | None:
    """CREATE [UNIQUE] INDEX / DROP INDEX / REINDEX {INDEX|TABLE} ... made CONCURRENTLY (None: no such form)."""
    toks = stmt.tokens
    if stmt.has_word("CONCURRENTLY"):
        return None
    head = [t.value for t in toks[:3] if t.kind == WORD]
    if head[:2] == ["CREATE", "INDEX"] or head[:3] == ["CREATE", "UNIQUE", "INDEX"] or head[:2] == ["DROP", "INDEX"]:
        i = next(k for k, t in enumerate(toks) if t.is_word("INDEX"))
        return _insert_after(stmt, i, " CONCURRENTLY")
    if head[:1] == ["REINDEX"]:
        for k, t in enumerate(toks[:4]):
            if t.is_word("INDEX", "TABLE", "SCHEMA"):
                return _insert_after(stmt, k, " CONCURRENTLY")
    return None


def instant(stmt: Statement) -> Statement | None:
    """ALTER TABLE ... with ALGORITHM=INSTANT added (None: not an ALTER TABLE, or it names an algorithm)."""
    words = [t.value for t in stmt.tokens[:3] if t.kind == WORD]
    if words[:2] != ["ALTER", "TABLE"] and words[:3] != ["ALTER", "ONLINE", "TABLE"] \
            and words[:3] != ["ALTER", "IGNORE", "TABLE"]:
        return None
    if stmt.has_word("ALGORITHM") or len(stmt.tokens) < 4:
        return None
    return Statement(stmt.text + ", ALGORITHM=INSTANT", ())


VARIANTS = {"concurrently": concurrently, "instant": instant}


def variant_of(stmts: list[Statement], variant: str | None, engine: str) -> list[Statement] | None:
    """The migration with ``variant`` applied to every statement that has such a form
    (None: no statement has one)."""
    if variant is None:
        return stmts
    rewrite = VARIANTS[variant]
    out, changed = [], False
    for s in stmts:
        new = rewrite(s)
        if new is None:
            out.append(s)
        else:
            changed = True
            again = try_statements(new.text, dialect(engine)) or [[]]
            out.append(Statement(new.text, tuple(again[0])))
    return out if changed else None
