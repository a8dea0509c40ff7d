"""Which prepared transactions a statement text prepared or finished, known from the
server's answer (the command tags of the statements that succeeded), with the
transaction's name read as the server reads it.

A name in a comment or a string is no statement (``SELECT 1 /* PREPARE
TRANSACTION 'x' */``), a PREPARE TRANSACTION the server answered ROLLBACK (outside
a transaction, or in a failed one) prepared nothing, and a gid written ``E'..'``
is the gid it decodes to.  Names come back as SQL literals, ready for ``ROLLBACK
PREPARED`` / ``XA ROLLBACK``.
"""

from __future__ import annotations

from .sqltext import MYSQL_SQL, NUMBER, OP, POSTGRES_SQL, STRING, Token, try_statements


def pg_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _xa_literal(parts: list[Token]) -> str | None:
    """gtrid [, bqual [, formatID]] as hex literals (any bytes, no quoting to get wrong)."""
    out, want_value = [], True
    for tok in parts:
        if want_value:
            if tok.kind == STRING:
                out.append("X'" + tok.value.encode("utf-8").hex() + "'" if tok.value else "''")
            elif tok.kind == NUMBER and len(out) == 2:
                out.append(tok.value)
            else:
                return None
            want_value = False
        elif tok.kind == OP and tok.value == ",":
            want_value = True
        else:
            return None
    return ",".join(out) if out and not want_value else None


def changes(sql: str, tags: list[str] | None, lexer: str) -> tuple[list[str], list[str]]:
    """``pg_changes`` or ``xa_changes``, by the SQL lexer's name (postgres | mysql)."""
    return _READERS[lexer](sql, tags)


def pg_changes(sql: str, tags: list[str] | None) -> tuple[list[str], list[str]]:
    """(prepared, finished): the prepared transactions the statements of ``sql`` that
    succeeded (``tags``, in order) prepared and finished (PREPARE TRANSACTION,
    COMMIT/ROLLBACK PREPARED)."""
    stmts = try_statements(sql, POSTGRES_SQL)
    prepared: list[str] = []
    finished: list[str] = []
    for stmt, tag in zip(stmts or [], tags or []):
        tag = tag.upper()
        if len(stmt) == 3 and stmt[0].is_word("PREPARE") and stmt[1].is_word("TRANSACTION") \
                and stmt[2].kind == STRING and tag == "PREPARE TRANSACTION":
            prepared.append(pg_literal(stmt[2].value))
        elif len(stmt) == 3 and stmt[0].is_word("COMMIT", "ROLLBACK") and stmt[1].is_word("PREPARED") \
                and stmt[2].kind == STRING and tag in ("COMMIT PREPARED", "ROLLBACK PREPARED"):
            finished.append(pg_literal(stmt[2].value))
    return prepared, finished


def xa_changes(sql: str, tags: list[str] | None) -> tuple[list[str], list[str]]:
    """(prepared, finished) for MariaDB/MySQL's XA PREPARE / XA COMMIT / XA ROLLBACK, of
    the statements that succeeded (``tags``: as many as succeeded; None: every
    statement, read before the answer is in)."""
    stmts = try_statements(sql, MYSQL_SQL)
    prepared: list[str] = []
    finished: list[str] = []
    if not stmts:
        return prepared, finished
    count = len(stmts) if tags is None else len(tags)
    for stmt in stmts[:count]:
        if len(stmt) >= 3 and stmt[0].is_word("XA") and stmt[1].is_word("PREPARE", "COMMIT", "ROLLBACK"):
            rest = stmt[2:]
            if stmt[1].value == "COMMIT" and len(rest) >= 2 and rest[-2].is_word("ONE") and rest[-1].is_word("PHASE"):
                rest = rest[:-2]
            xid = _xa_literal(rest)
            if xid is None:
                continue
            (prepared if stmt[1].value == "PREPARE" else finished).append(xid)
    return prepared, finished


_READERS = {POSTGRES_SQL: pg_changes, MYSQL_SQL: xa_changes}
