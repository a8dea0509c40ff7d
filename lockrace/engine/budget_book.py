"""A session's wait budgets, kept from what the session typed and what the server
answered: never read back on the session's own connection.

A read on the session's connection would be a statement the user did not type
(PostgreSQL: it takes a transaction's snapshot early and makes ``SET TRANSACTION
ISOLATION LEVEL`` fail; MySQL: it empties the diagnostics area that ``SHOW
WARNINGS``, ``ROW_COUNT()`` and ``FOUND_ROWS()`` read).  So the values are read
once, when the connection is made, and from then on follow the statements that
change them, with the server's own rules:

* PostgreSQL: ``SET``/``SET SESSION``, ``SET LOCAL``, ``RESET``, ``RESET ALL``,
  ``DISCARD ALL`` and ``set_config('name', 'value', is_local)`` with literal
  arguments, undone by ROLLBACK (and ROLLBACK TO SAVEPOINT) as the server undoes
  them; a multi-statement text outside a transaction is one implicit
  transaction (an error in it undoes its SETs).  Values in PostgreSQL's units.
* MariaDB/MySQL: ``SET [SESSION|LOCAL|@@session.|@@] name = value`` (not
  transactional), a number or DEFAULT (the global value), cut to the server's
  range as the server cuts it.

What the text does not say plainly (a value from an expression or a variable,
a function that changes a setting) makes that budget unknown: it is left out
rather than guessed.
"""

from __future__ import annotations

import math
import re

from ..core.events import Budget
from ..core.sqltext import NUMBER, OP, STRING, WORD, Token
from ..dialects import MARIADB, POSTGRES, dialect_for

PG_BUDGETS = POSTGRES.budget_names
MYSQL_BUDGETS = MARIADB.budget_names

_UNKNOWN = None  # a value the text does not tell

_PG_UNITS_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "min": 60_000.0, "h": 3_600_000.0, "d": 86_400_000.0}
_PG_TIME = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(us|ms|s|min|h|d)?\s*$")

def pg_ms(text: str) -> float | None:
    """A PostgreSQL time setting's value as SET takes it ('100ms', '2s', 1500) in ms;
    None when it is not one (the server refuses it)."""
    m = _PG_TIME.match(text)
    if not m:
        return None
    ms = float(m.group(1)) * _PG_UNITS_MS[m.group(2) or "ms"]
    return float(math.floor(ms + 0.5))  # the server rounds to its base unit, ms


class BudgetBook:
    """The budgets in force for one session (see the module's docstring)."""

    def __init__(self, flavor: str, initial: tuple[Budget, ...], globals_: dict[str, float] | None = None,
                 rollback_on_timeout: bool = False):
        self.flavor = flavor
        self.dialect = dialect_for(flavor)
        self.pg = self.dialect.transactional_settings  # PostgreSQL's rules: SET is undone by ROLLBACK
        self._names = self.dialect.budget_names
        self._fixed = tuple(b for b in initial if b.name not in self._names)  # server-level (a standby's)
        start = {b.name: b.ms for b in initial if b.name in self._names}
        self.reset = dict(start)  # what RESET (PostgreSQL) gives back
        self.defaults = dict(globals_ or start)  # what SET ... = DEFAULT gives (MariaDB/MySQL: the global value)
        self.session: dict[str, float | None] = dict(start)
        self.local: dict[str, float | None] = {}
        self.base: dict[str, float | None] | None = None  # the session values when the transaction began
        self.savepoints: list[tuple[str, dict, dict]] = []
        self.in_block = False

    # ------------------------------------------------------------ reading
    def budgets(self) -> tuple[Budget, ...]:
        values = {**self.session, **self.local}
        return tuple(Budget(n, v) for n in self._names if (v := values.get(n)) is not None) + self._fixed

    # ------------------------------------------------------------ following the statements
    def follow(self, sql: str, tags: list[str], failed: bool, txn_after: str) -> None:
        """``sql`` ran: ``tags`` are the command tags of the statements that succeeded,
        in order (the server runs nothing after a failed one); ``failed``: one
        failed after them; ``txn_after``: the session's transaction state after it."""
        stmts = self.dialect.statements(sql)
        if stmts is None:
            return  # the server could not read it either: it ran nothing
        if self.pg:
            self._follow_pg(stmts, tags, failed, txn_after)
        else:
            for stmt in stmts[:len(tags)]:
                self._mysql_set(stmt)

    def _follow_pg(self, stmts: list[list[Token]], tags: list[str], failed: bool, txn_after: str) -> None:
        implicit = not self.in_block and len(stmts) > 1
        if implicit:
            self.base = dict(self.session)
        for stmt, tag in zip(stmts, tags):
            self._pg_statement(stmt, tag.upper(), implicit)
        if failed and not self.in_block and implicit and self.base is not None:
            self.session = dict(self.base)  # the implicit transaction was rolled back, SETs and all
        if not self.in_block:
            self.base, self.local, self.savepoints = None, {}, []
        if txn_after == "idle" and self.in_block:
            self._end(commit=False)  # the server ended it (a FATAL, the connection lost)

    def _pg_statement(self, stmt: list[Token], tag: str, implicit: bool) -> None:
        w = [t.value if t.kind == WORD else "" for t in stmt[:4]]
        first = w[0] if w else ""
        if first in ("BEGIN", "START") and tag == "BEGIN":
            if not self.in_block:
                self.in_block = True
                if self.base is None:
                    self.base = dict(self.session)
                self.local, self.savepoints = {}, []
        elif first in ("COMMIT", "END") and tag in ("COMMIT", "ROLLBACK") or \
                first == "PREPARE" and tag in ("PREPARE TRANSACTION", "ROLLBACK"):
            commit = tag != "ROLLBACK"
            self._end(commit)
            if "CHAIN" in w or _chain(stmt):
                self._chain()
        elif first in ("ROLLBACK", "ABORT") and tag == "ROLLBACK":
            if len(w) > 1 and w[1] == "TO" or (len(w) > 2 and w[1] in ("WORK", "TRANSACTION") and w[2] == "TO"):
                self._rollback_to(_savepoint_name(stmt))
            else:
                self._end(commit=False)
                if _chain(stmt):
                    self._chain()
        elif first == "SAVEPOINT" and len(stmt) > 1:
            self.savepoints.append((_name(stmt[1]), dict(self.session), dict(self.local)))
        elif first == "RELEASE":
            name = _savepoint_name(stmt)
            idx = self._savepoint(name)
            if idx is not None:
                del self.savepoints[idx:]
        elif first == "SET" and tag == "SET":
            self._pg_set(stmt, implicit)
        elif first == "RESET" and tag == "RESET":
            if len(stmt) > 1 and stmt[1].is_word("ALL"):
                self._reset_all()
            elif len(stmt) > 1:
                self._assign(_name(stmt[1]), self.reset.get(_name(stmt[1])), local=False)
        elif first == "DISCARD" and tag == "DISCARD ALL":
            self._reset_all()
        elif first in ("SELECT", "VALUES", "WITH", "CALL", "DO", "INSERT", "UPDATE", "DELETE", "MERGE"):
            self._pg_set_config(stmt)

    def _pg_set(self, stmt: list[Token], implicit: bool) -> None:
        i, local = 1, False
        if len(stmt) > 1 and stmt[1].is_word("SESSION", "LOCAL"):
            local = stmt[1].value == "LOCAL"
            i = 2
            if len(stmt) > 2 and stmt[2].is_word("AUTHORIZATION", "CHARACTERISTICS"):
                return
        if i >= len(stmt) or stmt[i].kind not in (WORD, "name"):
            return
        name = _name(stmt[i])
        if name not in self._names:
            return
        rest = stmt[i + 1:]
        if rest and (rest[0].is_word("TO") or rest[0].kind == OP and rest[0].value == "="):
            rest = rest[1:]
        if local and not (self.in_block or implicit):
            return  # SET LOCAL outside a transaction block: a warning, and no effect
        if len(rest) == 1 and rest[0].is_word("DEFAULT"):
            value = self.reset.get(name)
        elif len(rest) == 1 and rest[0].kind in (NUMBER, STRING):
            value = pg_ms(rest[0].value)
        else:
            value = _UNKNOWN
        self._assign(name, value, local)

    def _pg_set_config(self, stmt: list[Token]) -> None:
        for i, tok in enumerate(stmt):
            if not (tok.is_word("SET_CONFIG") and i + 1 < len(stmt) and stmt[i + 1].value == "("):
                continue
            args = stmt[i + 2:i + 8]  # 'name' , 'value' , bool )
            literal = (len(args) == 6 and args[0].kind == STRING and args[1].value == "," and args[2].kind == STRING
                       and args[3].value == "," and args[4].is_word("TRUE", "FALSE") and args[5].value == ")")
            if literal:
                name = args[0].value.strip().lower()
                if name in self._names:
                    self._assign(name, pg_ms(args[2].value), local=args[4].value == "TRUE")
            elif args and args[0].kind == STRING:
                name = args[0].value.strip().lower()
                if name in self._names:
                    self._assign(name, _UNKNOWN, local=False)
            else:
                for name in self._names:  # which setting it changes is not in the text
                    self._assign(name, _UNKNOWN, local=False)

    def _assign(self, name: str, value: float | None, local: bool) -> None:
        if local:
            if self.in_block:
                self.local[name] = value
        else:
            self.session[name] = value
            self.local.pop(name, None)

    def _reset_all(self) -> None:
        for name in self._names:
            if name in self.reset:
                self.session[name] = self.reset[name]
        self.local = {}

    def _end(self, commit: bool) -> None:
        if not commit and self.base is not None:
            self.session = dict(self.base)
        self.in_block, self.base, self.local, self.savepoints = False, None, {}, []

    def _chain(self) -> None:
        self.in_block, self.base = True, dict(self.session)

    def _savepoint(self, name: str) -> int | None:
        for idx in range(len(self.savepoints) - 1, -1, -1):
            if self.savepoints[idx][0] == name:
                return idx
        return None

    def _rollback_to(self, name: str) -> None:
        idx = self._savepoint(name)
        if idx is None:
            return
        _, session, local = self.savepoints[idx]
        self.session, self.local = dict(session), dict(local)
        del self.savepoints[idx + 1:]

    # ------------------------------------------------------------ MariaDB / MySQL
    def _mysql_set(self, stmt: list[Token]) -> None:
        if not stmt or not stmt[0].is_word("SET") or (len(stmt) > 1 and stmt[1].is_word("STATEMENT", "GLOBAL",
                                                                                           "PERSIST", "PERSIST_ONLY",
                                                                                           "TRANSACTION", "NAMES",
                                                                                           "PASSWORD", "ROLE")):
            return
        # SET [SESSION|LOCAL] a = 1, [SESSION] b = DEFAULT, @@session.c := 2, @user = 3
        for part in _split_commas(stmt[1:]):
            toks = list(part)
            if toks and toks[0].is_word("SESSION", "LOCAL"):
                toks = toks[1:]
            if len(toks) >= 2 and toks[0].kind == OP and toks[0].value == "@" and toks[1].kind == OP \
                    and toks[1].value == "@":
                toks = toks[2:]
                if len(toks) >= 2 and toks[0].is_word("SESSION", "LOCAL") and toks[1].value == ".":
                    toks = toks[2:]
                elif len(toks) >= 2 and toks[0].is_word("GLOBAL", "PERSIST", "PERSIST_ONLY") and toks[1].value == ".":
                    continue
            elif toks and toks[0].kind == OP and toks[0].value == "@":
                continue  # a user variable
            if len(toks) < 3 or toks[0].kind not in (WORD, "name") or toks[1].value not in ("=", ":="):
                continue
            name = _name(toks[0])
            if name not in self._names:
                continue
            value_toks = toks[2:]
            self.session[name] = self._mysql_value(name, value_toks)

    def _mysql_value(self, name: str, toks: list[Token]) -> float | None:
        if len(toks) == 1 and toks[0].is_word("DEFAULT"):
            return self.defaults.get(name)
        sign = 1.0
        if len(toks) == 2 and toks[0].kind == OP and toks[0].value in "+-":
            sign, toks = (-1.0 if toks[0].value == "-" else 1.0), toks[1:]
        if len(toks) != 1 or toks[0].kind != NUMBER:
            return _UNKNOWN
        try:
            number = sign * float(toks[0].value)
        except ValueError:
            return _UNKNOWN
        if name not in self.dialect.fractional_budgets and not number.is_integer():
            return _UNKNOWN  # the server rounds or refuses it, depending on version
        low, high = self.dialect.budget_ranges.get(name, (0, float("inf")))
        number = min(max(number, low), high)
        return number if name == "max_execution_time" else number * 1000.0


def _name(tok: Token) -> str:
    return tok.value.lower()


def _savepoint_name(stmt: list[Token]) -> str:
    return _name(stmt[-1]) if stmt else ""


def _chain(stmt: list[Token]) -> bool:
    return any(a.is_word("AND") and b.is_word("CHAIN") for a, b in zip(stmt, stmt[1:])) and \
        not any(a.is_word("NO") and b.is_word("CHAIN") for a, b in zip(stmt, stmt[1:]))


def _split_commas(toks: list[Token]) -> list[list[Token]]:
    parts: list[list[Token]] = [[]]
    depth = 0
    for tok in toks:
        if tok.kind == OP and tok.value == "(":
            depth += 1
        elif tok.kind == OP and tok.value == ")":
            depth -= 1
        if tok.kind == OP and tok.value == "," and depth == 0:
            parts.append([])
        else:
            parts[-1].append(tok)
    return parts
