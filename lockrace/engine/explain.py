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
from ..core.sqltext import try_statements, words

COMMIT_ROLLED_BACK = ("COMMIT answered ROLLBACK: the transaction had already failed (an error earlier in it), "
                      "so nothing was committed; every change it made is gone")
NOWAIT_TABLE = ("NOWAIT covers only row locks: this statement waited the ordinary way for a table lock "
                "({lock}) before it looked at any row; LOCK TABLE ... NOWAIT refuses a table lock at once")


def _read(sql: str, flavor: str) -> tuple[bool, bool]:
    """(whether the text's last statement is a COMMIT, whether any statement says NOWAIT),
    as the server reads it: a word in a comment or a string is not a keyword."""
    stmts = try_statements(sql, "postgres" if flavor == "postgres" else "mysql") or []
    commit = bool(stmts) and words(stmts[-1], 1) in (("COMMIT",), ("END",))
    nowait = any(tok.is_word("NOWAIT") for stmt in stmts for tok in stmt)
    return commit, nowait


def notes(sql: str, result: StatementResult, flavor: str) -> tuple[str, ...]:
    """Plain words for a COMMIT that rolled back and for NOWAIT behind a table lock."""
    out = list(result.explained)
    commit, nowait = _read(sql, flavor)
    if result.tag == "ROLLBACK" and commit and COMMIT_ROLLED_BACK not in out:
        out.append(COMMIT_ROLLED_BACK)
    lock = result.lock
    # MariaDB's NOWAIT bounds metadata-lock waits too (lock_wait_timeout 0); PostgreSQL's and
    # MySQL's only row locks
    if lock is not None and lock.kind in ("relation", "metadata", "table") and flavor != "mariadb" and nowait:
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
        if race.backend.family == "postgres":
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
        if sandbox and race.backend.family == "mysql":  # the race's own tables by their plain names
            found.lines = [line.replace(f" {sandbox}.", " ") for line in found.lines]
        result.explained += tuple(found.lines) + ((found.cycle_line(),) if found.cycle else ())
        result.cycle = tuple(found.cycle)
