"""Locks in the words a learner reads."""

from __future__ import annotations

import re

# PostgreSQL's lock modes as its documentation writes them (LOCK TABLE ... IN ... MODE)
_PG_MODES = {
    "AccessShareLock": "ACCESS SHARE", "RowShareLock": "ROW SHARE", "RowExclusiveLock": "ROW EXCLUSIVE",
    "ShareUpdateExclusiveLock": "SHARE UPDATE EXCLUSIVE", "ShareLock": "SHARE",
    "ShareRowExclusiveLock": "SHARE ROW EXCLUSIVE", "ExclusiveLock": "EXCLUSIVE",
    "AccessExclusiveLock": "ACCESS EXCLUSIVE",
}


def pg_mode(mode: str) -> str:
    """'AccessExclusiveLock' -> 'ACCESS EXCLUSIVE'."""
    return _PG_MODES.get(mode, mode)


def innodb_mode(mode: str, next_key: bool = True) -> str:
    """InnoDB's lock_mode ('X,REC_NOT_GAP', 'S,GAP', 'X,INSERT_INTENTION') in words.
    ``next_key``: a bare X or S means the row and the gap before it (MySQL 8's
    data_locks); MariaDB's INNODB_LOCKS writes X for a row-only lock too."""
    parts = [p.strip().upper() for p in (mode or "").split(",") if p.strip()]
    if not parts:
        return mode
    base = {"X": "exclusive", "S": "shared", "IX": "intention exclusive", "IS": "intention shared",
            "AUTO_INC": "auto-increment"}.get(parts[0], parts[0])
    extra = {"REC_NOT_GAP": "the row only", "GAP": "the gap before the row",
             "INSERT_INTENTION": "to insert into the gap"}
    more = [extra.get(p, p.lower()) for p in parts[1:]]
    if not more and parts[0] in ("X", "S") and next_key:
        more = ["the row and the gap before it"]
    return f"{base} ({', '.join(more)})" if more else base


def row_wait(holder: str, how: str = "changed or locked") -> str:
    """A wait for a row another transaction changed or locked (PostgreSQL: a ShareLock on its
    transaction id): the row is free only when that transaction ends."""
    return f"waits for {holder}'s transaction to end ({holder} {how} this row)"


def row_queue(ahead: str) -> str:
    """PostgreSQL's tuple lock: whoever holds it is first in line for the row."""
    return (f"waits for its place in line for this row: {ahead} is ahead in the row's queue "
            f"(a tuple lock orders the waiters of one row; it is not a table lock)")


def plural_modes(text: str) -> str:
    return ", ".join(pg_mode(m) for m in text.split(",") if m) if text else ""


_INDEX_NAME = re.compile(r"^`?([^`]*)`?\.`?([^`]*)`?$")


def table_name(raw: str | None) -> str:
    """'`db`.`accounts`' -> 'db.accounts'; 'accounts' stays."""
    if not raw:
        return ""
    m = _INDEX_NAME.match(raw)
    return f"{m.group(1)}.{m.group(2)}" if m else raw.strip("`")


def wait_words(lock, blockers) -> str:
    """What a reported wait means, for a learner ('' when the lock's own words say it):
    a row wait PostgreSQL shows as a ShareLock on the holder's transaction id, and the
    tuple lock by which PostgreSQL queues the waiters of one row."""
    if lock is None or not blockers:
        return ""
    who = blockers[0] if len(blockers) == 1 else f"{', '.join(blockers[:-1])} and {blockers[-1]}"
    if lock.kind == "tuple" and lock.mode == "ShareLock":  # the waiter holds the row's tuple lock, waits for the xid
        return row_wait(who)
    if lock.kind == "transactionid":
        return f"waits for {who}'s transaction to end"
    if lock.kind == "tuple":
        return row_queue(who)
    return ""
