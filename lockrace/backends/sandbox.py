"""lockrace's own sandbox on a server it did not start: named, marked, owned.

Each lockrace process works in a schema (PostgreSQL) or database (MariaDB/MySQL)
of its own, created by this process (never adopted: no IF NOT EXISTS) and
marked as lockrace's with a comment naming its owner (host, pid, start time
and a random token): the schema's or database's own comment, or where the
server keeps none (MySQL, MariaDB before 10.5) the comment of an empty
procedure in the database (``MARKER_ROUTINE``).  The owner proves it is alive by holding a session lock
on a connection of its own for as long as it runs: a PostgreSQL advisory lock
on a key derived from the sandbox name, or a MariaDB/MySQL named lock
(GET_LOCK).  The server releases that lock when the owner's connection ends,
so a marked sandbox whose lock is free belongs to a process that is gone
(killed, crashed): the next lockrace run on that server removes it.

On a Galera node a named lock is the node's own: a lockrace on another node
of the cluster cannot see it, while the sandbox database (its comment, its
DROP) replicates.  There the owner also keeps a heartbeat: a row in a table
of the sandbox (``HEARTBEAT_TABLE``, InnoDB, so it replicates) that it
updates every ``BEAT_S``.  A lockrace on any node takes a marked sandbox for
gone only when its named lock is free on that node *and* the heartbeat has
not moved for ``STALE_S`` by the node's clock *and* does not move while it
watches for ``WATCH_S``; only then are the gone run's connections on that
node ended and its sandbox dropped.

A sandbox is dropped (at the end of a run, when it is emptied between
scenarios, and by the sweep) only when nothing outside it depends on it:
another client's view over one of its tables, foreign key to one, column or
function of one of its types stays as it is, and so does the sandbox, with
one sentence naming that object; a later run's sweep retries.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import socket
import time

from .base import ConnectError

MARK = "lockrace sandbox;"
ADVISORY_CLASS = 0x6C6B7263  # 'lkrc': first key of the two-key advisory lock
MARKER_ROUTINE = "lockrace_sandbox"  # MySQL (no database comments): an empty procedure carrying the mark
HEARTBEAT_TABLE = "lockrace_heartbeat"  # Galera: the owner's heartbeat row, in its sandbox
BEAT_S = 1.0  # Galera: how often the owner updates its heartbeat
STALE_S = 30  # Galera: a heartbeat this old (by the reading node's clock) may be a gone run's
WATCH_S = 3.0  # Galera: ... if it also stays still while another run watches it this long
UNBEATEN_S = 600  # Galera: a marked sandbox with no heartbeat table, started this long ago, is a gone run's
DDL_LOCK_WAIT_S = 5  # how long sandbox DDL, setup and teardown wait for a lock held by another client
SWEEP_LOCK_WAIT_S = 1  # removing a dead run's sandbox: a foreign lock in it makes the start wait this long


class SandboxError(ConnectError):
    """The sandbox cannot be created, emptied or dropped: one clear sentence."""


def new_token() -> str:
    return secrets.token_hex(4)


def marker(token: str) -> str:
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    host = re.sub(r"[^\w.-]", "", socket.gethostname())[:40]
    return f"{MARK} host={host} pid={os.getpid()} started={started} token={token}"


def is_marked(comment: str | None) -> bool:
    return comment is not None and comment.startswith(MARK)


def token_of(comment: str | None) -> str:
    m = re.search(r"\btoken=(\w+)", comment or "")
    return m.group(1) if m else ""


def owner_text(comment: str | None) -> str:
    """'pid 123 on host h since 2026-...' from a marker comment."""
    facts = dict(re.findall(r"\b(host|pid|started)=(\S+)", comment or ""))
    if not facts:
        return "owner unknown"
    return f"pid {facts.get('pid', '?')} on host {facts.get('host', '?')}, started {facts.get('started', '?')}"


def advisory_key(name: str) -> tuple[int, int]:
    """PostgreSQL two-key advisory lock (int4, int4) for sandbox ``name``."""
    digest = hashlib.blake2b(name.encode(), digest_size=4).digest()
    return ADVISORY_CLASS, int.from_bytes(digest, "big", signed=True)


def named_lock(name: str) -> str:
    """MariaDB/MySQL GET_LOCK name for sandbox ``name`` (at most 64 characters)."""
    return f"lockrace:{name}"[:64]


def refuse_existing(kind: str, name: str, comment: str | None, owner_alive: bool) -> SandboxError:
    """Why an existing schema/database of that name cannot be this run's sandbox."""
    if not is_marked(comment):
        return SandboxError(
            f"{kind} {name} already exists and is not a lockrace sandbox; lockrace never touches it: "
            f"set LOCKRACE_SANDBOX to another name (or leave it unset for a fresh one)")
    if owner_alive:
        return SandboxError(
            f"{kind} {name} is the sandbox of another lockrace process that is still running "
            f"({owner_text(comment)}): set LOCKRACE_SANDBOX to another name (or leave it unset for a fresh one)")
    return SandboxError(
        f"{kind} {name} is left over from a lockrace run that is gone ({owner_text(comment)}) but could not be "
        f"removed (another client holds a lock in it): set LOCKRACE_SANDBOX to another name")


def foreign_dependents(what: str, kind: str, name: str, dependents: list[str], marked: bool = True) -> str:
    """Why the sandbox was not dropped (or emptied): objects outside it depend on it.
    ``marked``: the sandbox carries lockrace's mark, so a later run can sweep it."""
    first = dependents[0]
    more = f" (and {len(dependents) - 1} more)" if len(dependents) > 1 else ""
    return (f"could not {what} the sandbox {kind} {name}: {first}{more} outside it depends on objects in it"
            f" and lockrace never drops what is not its own; the {kind} is left in place"
            + left_for(kind, name, "nothing outside it depends on it", marked))


def left_for(kind: str, name: str, once: str, marked: bool) -> str:
    """Who removes a sandbox left in place: a later run, if the sandbox is marked as
    lockrace's (unmarked: MySQL, whose databases take no comment, where this account
    may not create the marker procedure)."""
    if marked:
        return f" (a later lockrace run removes it once {once})"
    return (f" (nothing on this server marks it as lockrace's for a later run to find:"
            f" DROP {kind.upper()} `{name}` once {once})")


def started_age_s(comment: str | None) -> float | None:
    """Seconds since the marker's start time (None: no start time in it)."""
    m = re.search(r"\bstarted=(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)", comment or "")
    if not m:
        return None
    import calendar

    return time.time() - calendar.timegm(time.strptime(m.group(1), "%Y-%m-%dT%H:%M:%SZ"))
