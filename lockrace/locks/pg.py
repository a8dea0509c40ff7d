"""A PostgreSQL server's sessions and lock waits (pg_stat_activity, pg_locks, pg_blocking_pids).

Read on a connection of its own that is read-only and bounded (statement_timeout,
lock_timeout); the queries read the server's statistics and lock views only, never
a user's table, so rows are named by their place in the table (ctid), the way the
lock views give them.
"""

from __future__ import annotations

import re

import psycopg

from ..backends.postgres import process_name
from .model import Client, Snapshot, Wait
from ..core import lockwords as words

STATEMENT_TIMEOUT_MS = 2000

# the same lockable object in two pg_locks rows
_SAME = " AND ".join(f"{{a}}.{c} IS NOT DISTINCT FROM {{b}}.{c}" for c in (
    "locktype", "database", "relation", "page", "tuple", "virtualxid", "transactionid", "classid", "objid", "objsubid"))

_CLIENTS = """
SELECT a.pid, coalesce(a.usename, ''), coalesce(a.application_name, ''), coalesce(a.state, ''),
       coalesce(a.backend_type, ''), left(coalesce(a.query, ''), 300),
       extract(epoch FROM clock_timestamp() - a.xact_start)::float8 * 1000,
       CASE WHEN a.wait_event_type = 'Lock' THEN extract(epoch FROM clock_timestamp() - a.state_change)::float8 * 1000 END
FROM pg_stat_activity a
WHERE a.pid <> pg_backend_pid()
ORDER BY a.pid
"""

_WAITS = """
WITH l AS MATERIALIZED (SELECT * FROM pg_locks)
SELECT w.pid, b.pid, w.locktype, w.mode, {rel_w}, w.page, w.tuple,
       w.transactionid::text, w.virtualxid, w.classid, w.objid, w.objsubid,
       {waited},
       {rel_t}, t.page, t.tuple,
       EXISTS (SELECT 1 FROM l q WHERE q.pid = b.pid AND NOT q.granted AND {same_q}),
       (SELECT string_agg(DISTINCT h.mode, ',') FROM l h WHERE h.pid = b.pid AND h.granted AND {same_h})
FROM l w
CROSS JOIN LATERAL (SELECT DISTINCT unnest(pg_blocking_pids(w.pid)) AS pid) b
LEFT JOIN LATERAL (SELECT * FROM l g WHERE g.pid = w.pid AND g.granted AND g.locktype = 'tuple' LIMIT 1) t ON true
WHERE NOT w.granted AND w.pid <> pg_backend_pid()
ORDER BY w.pid, b.pid
"""

# a relation by name in the database read; one of another database by its oid and database
_REL = ("CASE WHEN {a}.relation IS NULL THEN NULL"
        " WHEN {a}.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        " THEN {a}.relation::regclass::text"
        " ELSE {a}.relation::text || ' in database ' || coalesce((SELECT datname FROM pg_database"
        " WHERE oid = {a}.database), '?') END")

_LOCKRACE_APP = re.compile(r"^lockrace (?:lockrace_\w+ )?([A-Z][A-Za-z0-9_]{0,7})$")


def open_for(source) -> psycopg.Connection:
    """The reading connection to a ``Source`` (locks/sources.py) of PostgreSQL."""
    return connect(source.conninfo)


def connect(conninfo: str) -> psycopg.Connection:
    """A read-only connection whose every statement is bounded."""
    from ..servers.target import pg_options

    options = pg_options(conninfo, f"-c statement_timeout={STATEMENT_TIMEOUT_MS}", "-c lock_timeout=100",
                         "-c default_transaction_read_only=on", "-c idle_in_transaction_session_timeout=10000")
    return psycopg.connect(conninfo, autocommit=True, connect_timeout=5, application_name="lockrace locks",
                           options=options)


def read(conn: psycopg.Connection, where: str = "") -> Snapshot:
    version = conn.info.parameter_status("server_version") or str(conn.info.server_version)
    snap = Snapshot(f"PostgreSQL {version.split()[0]}", where)
    clients = {}
    for pid, user, app, state, btype, query, xact_ms, wait_ms in conn.execute(_CLIENTS).fetchall():
        m = _LOCKRACE_APP.match(app)
        process = btype != "client backend"
        clients[pid] = Client(pid, user, app, state or btype, " ".join(query.split()), wait_ms, xact_ms,
                              name=m.group(1) if m else process_name(pid, btype) if process else "",
                              kind="process" if process else "client")
    waited = ("extract(epoch FROM clock_timestamp() - w.waitstart)::float8 * 1000"
              if conn.info.server_version >= 140000 else "NULL::float8")
    sql = _WAITS.format(waited=waited, rel_w=_REL.format(a="w"), rel_t=_REL.format(a="t"), same_q=_SAME.format(a="q", b="w"), same_h=_SAME.format(a="h", b="w"))
    rows = conn.execute(sql).fetchall()
    if any(r[1] == 0 for r in rows):  # pg_blocking_pids names a prepared transaction's locks by pid 0
        clients[0] = Client(0, state="prepared: holds its locks until COMMIT PREPARED or ROLLBACK PREPARED",
                            name="a prepared transaction", kind="prepared")
    snap.clients = list(clients.values())
    involved = set()
    for (pid, blocker, locktype, mode, rel, page, tup, xid, vxid, classid, objid, objsubid, waited_ms,
         trel, tpage, ttup, queued, held) in rows:
        involved |= {pid, blocker}
        waiter = clients.get(pid)
        if waiter is not None and waited_ms is not None:
            waiter.waiting_ms = waited_ms
        who = snap.label(blocker)
        lock, words_ = _lock_words(locktype, mode, rel, page, tup, xid, vxid, classid, objid, objsubid,
                                   trel, tpage, ttup, who, queued, held or "")
        snap.waits.append(Wait(pid, blocker, lock, mode or "", waited_ms if waited_ms is not None else
                               (waiter.waiting_ms if waiter else None), bool(queued), held or "", words_,
                               locktype or ""))
    # every client backend; server processes (the startup process replaying WAL on a hot
    # standby, autovacuum, ...) only when they take part in a wait
    snap.clients = [c for c in clients.values() if c.kind == "client" or c.ident in involved]
    return snap


def _lock_words(locktype, mode, rel, page, tup, xid, vxid, classid, objid, objsubid, trel, tpage, ttup,
                who: str, queued: bool, held: str = "") -> tuple[str, str]:
    """(the object, the whole wait in words)."""
    holds = f"holds {words.plural_modes(held)}" if held else "holds it"
    how = f"queued behind {who}'s pending request" if queued else f"waits for {who}, which {holds}"
    if locktype == "transactionid" and who == "a prepared transaction":
        lock = f"row {trel} ({tpage},{ttup}), held by a prepared transaction" if trel else f"transaction {xid}, prepared"
        return lock, (f"{lock}: ShareLock on transaction {xid}: waits until it is finished by COMMIT PREPARED or "
                      "ROLLBACK PREPARED (no session holds it; it outlives its connection)")
    if locktype == "transactionid" and trel:
        lock = f"row {trel} ({tpage},{ttup}), held through {who}'s transaction"
        return lock, f"{lock}: ShareLock on transaction {xid}: {words.row_wait(who)}"
    if locktype == "transactionid":
        lock = f"transaction {xid} ({who}'s)"
        return lock, f"{lock}: {words.row_wait(who, 'changed, locked or inserted')}"
    if locktype == "tuple":
        lock = f"row {rel} ({page},{tup})"
        return lock, f"{lock}: {words.row_queue(who)}"
    if locktype == "relation":
        lock = f"relation {rel}"
        return lock, f"{lock}: {words.pg_mode(mode)} requested; {how}"
    if locktype == "advisory":
        key = str((int(classid) << 32) | int(objid)) if objsubid == 1 else f"({classid}, {objid})"
        lock = f"advisory lock {key}"
        return lock, f"{lock}: {words.pg_mode(mode)} requested; {how}"
    if locktype == "virtualxid":
        lock = f"virtual transaction {vxid} ({who}'s)"
        return lock, f"{lock}: waits for {who}'s transaction to end (CREATE INDEX CONCURRENTLY and the like wait for older transactions)"
    lock = f"{locktype} {rel or objid or ''}".strip()
    return lock, f"{lock}: {words.pg_mode(mode)} requested; {how}"
