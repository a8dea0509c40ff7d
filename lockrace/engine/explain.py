"""What lockrace adds to an answer in plain words (``StatementResult.explained``).

A deadlock victim gets the server's account of the cycle with sessions by name
(see core/deadlock.py); a COMMIT that the server answered with ROLLBACK says that
the transaction had failed and nothing was committed; a NOWAIT statement that
waited for a table lock says NOWAIT covers only row locks.
"""

from __future__ import annotations

import asyncio

from ..core import deadlock as deadlock_mod
from ..core.events import StatementResult
from ..core.sqltext import words
from ..dialects import Dialect, dialect_for

COMMIT_ROLLED_BACK = ("COMMIT answered ROLLBACK: the transaction had already failed (an error earlier in it), "
                      "so nothing was committed; every change it made is gone")
NOWAIT_TABLE = ("NOWAIT covers only row locks: this statement waited the ordinary way for a table lock "
                "({lock}) before it looked at any row; LOCK TABLE ... NOWAIT refuses a table lock at once")


def _read(sql: str, dialect: Dialect) -> tuple[bool, bool]:
    """(whether the text's last statement is a COMMIT, whether any statement says NOWAIT),
    as the server reads it: a word in a comment or a string is not a keyword."""
    stmts = dialect.statements(sql) or []
    commit = bool(stmts) and words(stmts[-1], 1) in (("COMMIT",), ("END",))
    nowait = any(tok.is_word("NOWAIT") for stmt in stmts for tok in stmt)
    return commit, nowait


def notes(sql: str, result: StatementResult, flavor: str) -> tuple[str, ...]:
    """Plain words for a COMMIT that rolled back and for NOWAIT behind a table lock."""
    out = list(result.explained)
    lock = result.lock
    dialect = dialect_for(flavor)
    # MariaDB's NOWAIT bounds metadata-lock waits too (lock_wait_timeout 0); PostgreSQL's and
    # MySQL's only row locks
    table_wait = lock is not None and lock.kind in ("relation", "metadata", "table") \
        and not dialect.nowait_bounds_table_locks
    if result.tag != "ROLLBACK" and not table_wait:
        return tuple(out)  # nothing to read in the text (this is on the answer's way after a row-lock wait)
    commit, nowait = _read(sql, dialect)
    if result.tag == "ROLLBACK" and commit and COMMIT_ROLLED_BACK not in out:
        out.append(COMMIT_ROLLED_BACK)
    if table_wait and nowait and lock is not None:
        line = NOWAIT_TABLE.format(lock=lock.describe())
        if line not in out:
            out.append(line)
    return tuple(out)


async def deadlock(race, session, result: StatementResult) -> None:
    """The victim's result gets the cycle as the server told it, sessions by name:
    PostgreSQL's DETAIL lines, or InnoDB's latest deadlock read on the monitor."""
    def name(ident: int) -> str:
        return race.name_of(ident, session.node)

    def changed(who: str) -> bool:
        other = race.sessions.get(who)
        return other is not None and other.wrote_in_txn

    found = None
    try:
        if race.backend.dialect.deadlock_in_detail:
            found = deadlock_mod.explain_postgres(result.detail, name, session.name, changed)
        elif (monitor := race.monitor_for(session)) is not None:
            try:
                report = await asyncio.wait_for(monitor.deadlock_report(), timeout=2)
            except TimeoutError:
                report = None
            found = deadlock_mod.explain_innodb(report or "", name, session.ident)
            if report is None:
                result.explained += ("the server's deadlock report could not be read "
                                     "(SHOW ENGINE INNODB STATUS needs the PROCESS privilege)",)
    except Exception:
        found = None
    if found is not None and found.lines:
        sandbox = getattr(race.backend, "sandbox", "")
        if sandbox and race.backend.dialect.qualified_table_names:  # the race's own tables by their plain names
            found.lines = [line.replace(f" {sandbox}.", " ") for line in found.lines]
        result.explained += tuple(found.lines) + ((found.cycle_line(),) if found.cycle else ())
        result.cycle = tuple(found.cycle)
