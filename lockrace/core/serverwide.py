"""Statements whose effect reaches past lockrace's sandbox: the server's
configuration, its roles and databases, every client's view of it.

On a server lockrace did not start, lockrace runs only what stays inside its
sandbox schema (PostgreSQL) or database (MariaDB/MySQL).  ``server_wide``
reads a statement the way the server does (core/sqltext.py: comments skipped,
string literals read as literals, statements split) and names the first one
that would change the server as a whole:

* PostgreSQL: ALTER SYSTEM; pg_reload_conf(), pg_promote(), pg_rotate_logfile()
  (called anywhere in a statement); ALTER DATABASE, ALTER/CREATE/DROP ROLE,
  USER, GROUP, DATABASE, TABLESPACE; CREATE/ALTER/DROP EVENT TRIGGER and
  SUBSCRIPTION; GRANT/REVOKE of a role (membership); REASSIGN OWNED, DROP
  OWNED; and any of these inside a DO block's body (also as EXECUTE '...').
* MariaDB/MySQL: SET GLOBAL / PERSIST / PERSIST_ONLY (also @@global.x,
  @@persist.x); CREATE/ALTER/DROP/RENAME USER, CREATE/DROP ROLE, GRANT, REVOKE,
  SET PASSWORD, SET DEFAULT ROLE; CREATE/ALTER/DROP DATABASE or SCHEMA;
  INSTALL/UNINSTALL; FLUSH (but FLUSH TABLES of named tables); RESET; PURGE;
  CHANGE MASTER/REPLICATION; START/STOP SLAVE/REPLICA; SHUTDOWN, RESTART;
  CREATE/ALTER/DROP SERVER; ALTER INSTANCE.

Not seen: what a function or procedure runs when it is called (its body was
created earlier: CREATE FUNCTION ... AS 'ALTER SYSTEM ...' then SELECT f()),
and SQL built at run time from pieces (EXECUTE format(...), PREPARE of a
string made by concatenation).
"""

from __future__ import annotations

import re

from .sqltext import MYSQL_SQL, NAME, OP, POSTGRES_SQL, STRING, WORD, Token, try_statements, words

_PG_CALLS = {"PG_RELOAD_CONF": "pg_reload_conf()", "PG_PROMOTE": "pg_promote()",
             "PG_ROTATE_LOGFILE": "pg_rotate_logfile()"}
_PG_OBJECTS = ("ROLE", "USER", "GROUP", "DATABASE", "TABLESPACE")
_MY_SET_SCOPES = ("GLOBAL", "PERSIST", "PERSIST_ONLY")

# Text the lexer cannot read (an unterminated literal): look at the words themselves.
_UNREAD = {
    POSTGRES_SQL: re.compile(r"\bALTER\s+SYSTEM\b|\bpg_reload_conf\s*\(|\b(ALTER|CREATE|DROP)\s+(ROLE|USER|GROUP|DATABASE"
                           r"|TABLESPACE)\b", re.I),
    MYSQL_SQL: re.compile(r"\bSET\b[^;]*\b(GLOBAL|PERSIST|PERSIST_ONLY)\b|@@(global|persist)\b|\b(CREATE|DROP|ALTER)\s+"
                        r"(USER|ROLE|DATABASE|SCHEMA)\b|\bGRANT\b|\bFLUSH\b|\bSHUTDOWN\b", re.I),
}


def refuse_server_wide(what: str, statement: str) -> str:
    """The one sentence that refuses ``what`` (a scenario, a spec, a statement) on a
    server lockrace did not start."""
    return (f"{what} runs {statement}, which changes the whole server and not only lockrace's sandbox:"
            " it runs only on the servers lockrace starts itself, not on a server given by DSN")


def dialect_of(engine: str) -> str:
    """The SQL dialect of an engine, topology or flavor name."""
    return POSTGRES_SQL if engine.startswith("postgres") else MYSQL_SQL


def server_wide(sql: str, dialect: str = POSTGRES_SQL) -> str | None:
    """The first statement in ``sql`` that changes the server beyond lockrace's
    sandbox, named in a few words ('ALTER SYSTEM', 'SET GLOBAL', 'pg_reload_conf()');
    None when there is none."""
    stmts = try_statements(sql, dialect)
    if stmts is None:
        m = _UNREAD[dialect].search(sql)
        return " ".join(m.group(0).upper().split()) if m else None
    check = _pg_statement if dialect == POSTGRES_SQL else _mysql_statement
    for stmt in stmts:
        found = check(stmt)
        if found:
            return found
    return None


def _pg_statement(stmt: list[Token]) -> str | None:
    w = words(stmt, 4)
    head = w[:1]
    if w[:2] == ("ALTER", "SYSTEM"):
        return "ALTER SYSTEM"
    if head in (("ALTER",), ("CREATE",), ("DROP",)):
        rest = w[1:]
        if rest[:1] and rest[0] in _PG_OBJECTS:
            return f"{w[0]} {rest[0]}"
        if rest[:2] in (("EVENT", "TRIGGER"),):
            return f"{w[0]} EVENT TRIGGER"
        if rest[:1] == ("SUBSCRIPTION",):
            return f"{w[0]} SUBSCRIPTION"
    if w[:2] in (("REASSIGN", "OWNED"), ("DROP", "OWNED")):
        return " ".join(w[:2])
    if head in (("GRANT",), ("REVOKE",)) and not any(t.is_word("ON") for t in stmt):
        return f"{w[0]} of a role"
    for a, b in zip(stmt, stmt[1:]):
        if a.kind == WORD and a.value in _PG_CALLS and b.kind == OP and b.value == "(":
            return _PG_CALLS[a.value]
    if head == ("DO",):
        for tok in stmt:
            if tok.kind == STRING:
                found = _pg_body(tok.value)
                if found:
                    return found
    return None


def _pg_body(body: str) -> str | None:
    """A DO block's body (PL/pgSQL): its statements, and the literals it EXECUTEs."""
    stmts = try_statements(body, POSTGRES_SQL)
    if stmts is None:
        m = _UNREAD[POSTGRES_SQL].search(body)
        return " ".join(m.group(0).upper().split()) if m else None
    for stmt in stmts:
        # a statement may follow BEGIN, DECLARE ..., THEN, ELSE, LOOP on the same "statement"
        for i, tok in enumerate(stmt):
            if i == 0 or stmt[i - 1].is_word("BEGIN", "THEN", "ELSE", "LOOP", "DECLARE") or tok.is_word("EXECUTE"):
                found = _pg_statement(stmt[i:])
                if found:
                    return found
            if tok.is_word("EXECUTE") and i + 1 < len(stmt) and stmt[i + 1].kind == STRING:
                found = server_wide(stmt[i + 1].value, POSTGRES_SQL)
                if found:
                    return found
    return None


def _mysql_statement(stmt: list[Token]) -> str | None:
    w = words(stmt, 4)
    head = w[:1]
    if head == ("SET",):
        for i, tok in enumerate(stmt):
            if tok.kind == WORD and tok.value in _MY_SET_SCOPES:
                prev = stmt[i - 1] if i else None
                sysvar = i >= 2 and all(t.kind == OP and t.value == "@" for t in stmt[i - 2:i])
                single_at = prev is not None and prev.kind == OP and prev.value == "@" and not sysvar
                at_clause = prev is not None and (prev.is_word("SET") or (prev.kind == OP and prev.value == ","))
                if sysvar or (at_clause and not single_at):
                    return f"SET {tok.value}"
        if w[1:2] in (("PASSWORD",), ("DEFAULT",)):
            return " ".join(w[:3]) if w[1:2] == ("DEFAULT",) else "SET PASSWORD"
        return None
    if head in (("CREATE",), ("ALTER",), ("DROP",), ("RENAME",)):
        # CREATE OR REPLACE USER, DROP USER IF EXISTS: the object is the word after the verb (or OR REPLACE)
        obj = w[3:4] if w[1:3] == ("OR", "REPLACE") else w[1:2]
        if obj and obj[0] in ("USER", "ROLE", "DATABASE", "SCHEMA", "SERVER", "INSTANCE"):
            return f"{w[0]} {obj[0]}"
        return None
    if head in (("GRANT",), ("REVOKE",), ("INSTALL",), ("UNINSTALL",), ("RESET",), ("PURGE",), ("SHUTDOWN",),
                ("RESTART",)):
        return w[0]
    if head == ("FLUSH",):
        rest = [t for t in stmt[1:] if not t.is_word("LOCAL", "NO_WRITE_TO_BINLOG")]
        if rest and rest[0].is_word("TABLE", "TABLES") and len(rest) > 1 and rest[1].kind in (WORD, NAME) \
                and not rest[1].is_word("WITH", "FOR"):
            return None  # FLUSH TABLES t1, t2 [FOR EXPORT | WITH READ LOCK]: named tables only
        return "FLUSH" + (" TABLES WITH READ LOCK" if any(t.is_word("READ") for t in rest) else "")
    if w[:2] in (("CHANGE", "MASTER"), ("CHANGE", "REPLICATION")):
        return " ".join(w[:2])
    if head in (("START",), ("STOP",)) and any(t.is_word("SLAVE", "SLAVES", "REPLICA", "REPLICAS") for t in stmt[1:3]):
        return f"{w[0]} REPLICA"
    return None
