"""Named words for a session's transaction state and for the kinds of lock a
statement may wait on.

StrEnums: each member equals its string ("idle", "row", ...), so scenario
files, transcripts and JSON output read and write the same words as before.
"""

from __future__ import annotations

from enum import StrEnum


class TxnState(StrEnum):
    """A session's transaction state as its connection reports it."""

    IDLE = "idle"
    IN_TRANSACTION = "in transaction"
    FAILED_TRANSACTION = "failed transaction"  # PostgreSQL: an error, ROLLBACK needed
    CLOSED = "closed"  # the connection is gone


class LockKind(StrEnum):
    """What ``lock:`` may name: the kind of lock a step waited on, as the server reported it."""

    ROW = "row"
    RELATION = "relation"
    VIRTUALXID = "virtualxid"
    TRANSACTIONID = "transactionid"
    METADATA = "metadata"
    ADVISORY = "advisory"
