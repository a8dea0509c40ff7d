"""A MariaDB or MySQL server's sessions and lock waits.

MariaDB: row waits from information_schema.INNODB_LOCK_WAITS / INNODB_LOCKS /
INNODB_TRX; metadata-lock holders from METADATA_LOCK_INFO when that plugin is
loaded (without it the server does not say who holds a metadata lock, and the
snapshot says so).  MySQL 8 and later: performance_schema.data_lock_waits, whose
blocking engine transaction is found in INNODB_TRX, and metadata_locks.  The
connection is bounded (max_statement_time / max_execution_time, lock_wait_timeout)
and read-only; nothing here reads a user's table.
"""

from __future__ import annotations

import re

import pymysql

from .model import Client, Snapshot, Wait
from ..dialects import mysql_dialect_of
from ..dialects.mysql_family import MySQLFamilyDialect
from ..core import lockwords as words

STATEMENT_TIMEOUT_S = 2

_MDL_STATE = re.compile(r"Waiting for .*(metadata|backup|global read) lock", re.IGNORECASE)
_DDL = re.compile(r"^\s*(ALTER|DROP|TRUNCATE|RENAME|OPTIMIZE|CREATE\s+(UNIQUE\s+|FULLTEXT\s+|SPATIAL\s+)?INDEX|LOCK\s+TABLES?)\b",
                  re.IGNORECASE)

# MySQL's metadata-lock compatibility (sql/mdl.cc): for a requested type, the granted types
# it must wait for, and the pending (queued) types it must wait behind
_MDL = ("SHARED", "SHARED_HIGH_PRIO", "SHARED_READ", "SHARED_WRITE", "SHARED_WRITE_LOW_PRIO", "SHARED_UPGRADABLE",
        "SHARED_READ_ONLY", "SHARED_NO_WRITE", "SHARED_NO_READ_WRITE", "EXCLUSIVE")
_GRANTED_CONFLICTS = {
    "SHARED": {"EXCLUSIVE"}, "SHARED_HIGH_PRIO": {"EXCLUSIVE"},
    "SHARED_READ": {"SHARED_NO_READ_WRITE", "EXCLUSIVE"},
    "SHARED_WRITE": {"SHARED_READ_ONLY", "SHARED_NO_WRITE", "SHARED_NO_READ_WRITE", "EXCLUSIVE"},
    "SHARED_WRITE_LOW_PRIO": {"SHARED_READ_ONLY", "SHARED_NO_WRITE", "SHARED_NO_READ_WRITE", "EXCLUSIVE"},
    "SHARED_UPGRADABLE": {"SHARED_UPGRADABLE", "SHARED_NO_WRITE", "SHARED_NO_READ_WRITE", "EXCLUSIVE"},
    "SHARED_READ_ONLY": {"SHARED_WRITE", "SHARED_WRITE_LOW_PRIO", "SHARED_NO_READ_WRITE", "EXCLUSIVE"},
    "SHARED_NO_WRITE": {"SHARED_WRITE", "SHARED_WRITE_LOW_PRIO", "SHARED_UPGRADABLE", "SHARED_NO_WRITE",
                        "SHARED_NO_READ_WRITE", "EXCLUSIVE"},
    "SHARED_NO_READ_WRITE": set(_MDL[2:]),
    "EXCLUSIVE": set(_MDL),
}
_PENDING_CONFLICTS = {
    "SHARED": {"EXCLUSIVE"}, "SHARED_HIGH_PRIO": set(),
    "SHARED_READ": {"SHARED_NO_READ_WRITE", "EXCLUSIVE"},
    "SHARED_WRITE": {"SHARED_NO_WRITE", "SHARED_NO_READ_WRITE", "EXCLUSIVE"},
    "SHARED_WRITE_LOW_PRIO": {"SHARED_READ_ONLY", "SHARED_NO_WRITE", "SHARED_NO_READ_WRITE", "EXCLUSIVE"},
    "SHARED_UPGRADABLE": {"EXCLUSIVE"},
    "SHARED_READ_ONLY": {"SHARED_WRITE", "SHARED_NO_READ_WRITE", "EXCLUSIVE"},
    "SHARED_NO_WRITE": {"EXCLUSIVE"}, "SHARED_NO_READ_WRITE": {"EXCLUSIVE"}, "EXCLUSIVE": set(),
}


def open_for(source) -> pymysql.connections.Connection:
    """The reading connection to a ``Source`` (locks/sources.py) of MariaDB or MySQL."""
    return connect(source.mysql_kwargs or {})


def connect(kwargs: dict) -> pymysql.connections.Connection:
    """A read-only connection whose every statement is bounded."""
    conn = pymysql.connect(**kwargs, autocommit=True, connect_timeout=5, read_timeout=STATEMENT_TIMEOUT_S + 5,
                           charset="utf8mb4")
    cur = conn.cursor()
    cur.execute("SELECT VERSION()")
    dialect = mysql_dialect_of(str(cur.fetchone()[0]))
    cur.execute(f"SET SESSION {dialect.limit_clause(STATEMENT_TIMEOUT_S)}, lock_wait_timeout = 1,"
                " innodb_lock_wait_timeout = 1")
    cur.execute("SET SESSION TRANSACTION READ ONLY")
    return conn


def read(conn, where: str = "") -> Snapshot:
    cur = conn.cursor()
    cur.execute("SELECT VERSION(), CONNECTION_ID()")
    version, me = cur.fetchone()
    dialect = mysql_dialect_of(str(version))
    snap = Snapshot(f"{dialect.label} {str(version).split('-')[0]}", where)
    try:
        cur.execute("SELECT @@wsrep_on, @@wsrep_node_name")
        on, node = cur.fetchone()
        if str(on).upper() in ("1", "ON"):
            snap.node = str(node or "")
            snap.notes.append(f"a Galera node ({snap.node or 'unnamed'}): this shows its own locks only; "
                              "read each node of the cluster")
    except pymysql.MySQLError:
        pass
    cur.execute(f"SELECT ID, USER, HOST, COMMAND, {dialect.processlist_ms}, STATE, LEFT(INFO, 300) FROM information_schema.PROCESSLIST"
                " WHERE ID <> CONNECTION_ID() ORDER BY ID")
    states: dict[int, tuple[str, str, float]] = {}
    for ident, user, host, command, ms, state, info in cur.fetchall():
        ident = int(ident)
        text = " ".join(str(info or "").split())
        shown = str(state or command or "")
        c = Client(ident, str(user or ""), str(host or ""), shown, text, None, None, kind="thread")
        c.system = str(user) in ("system user", "event_scheduler") or command in ("Daemon", "Binlog Dump")
        snap.clients.append(c)
        states[ident] = (str(state or ""), text, float(ms or 0))
    _row_waits(cur, snap, dialect, states)
    _metadata_waits(cur, snap, dialect, states)
    for c in snap.clients:
        if snap.waits_of(c.ident):
            c.waiting_ms = states[c.ident][2]
    involved = {w.waiter for w in snap.waits} | {w.blocker for w in snap.waits}
    snap.clients = [c for c in snap.clients if not c.system or c.ident in involved]
    return snap


def _row_waits(cur, snap: Snapshot, dialect: MySQLFamilyDialect, states) -> None:
    next_key = dialect.lock_views_in_performance_schema  # a bare X or S in data_locks: row and gap
    try:
        cur.execute(dialect.lock_view("server_row_waits"))
        rows = cur.fetchall()
    except pymysql.MySQLError as exc:
        snap.notes.append(f"row-lock waits not readable: {exc.args[-1] if exc.args else exc}")
        return
    for waiter, blocker, mode, ltype, table, index, data, queued, held in rows:
        waiter, blocker = int(waiter), int(blocker)
        who = snap.label(blocker)
        table = words.table_name(table)
        how = f"queued behind {who}'s pending request" if queued else f"{who} holds it"
        if str(ltype or "").upper() == "RECORD":
            where = "the gap before the end of the index" if data == "supremum pseudo-record" else f"key {data}"
            lock = f"row {table} {index} {where}" if index else f"row {table} {where}"
            text = (f"{lock}, held through {who}'s transaction: {words.innodb_mode(mode, next_key)} requested; "
                    + (how if queued else words.row_wait(who)))
            kind = "record"
        else:
            lock = f"table {table}"
            text = f"{lock}: {words.innodb_mode(mode, next_key)} requested; {how}"
            kind = "table"
        snap.waits.append(Wait(waiter, blocker, lock, str(mode or ""), states.get(waiter, ("", "", 0))[2],
                               bool(queued), str(held or ""), text, kind))


def _metadata_waits(cur, snap: Snapshot, dialect: MySQLFamilyDialect, states) -> None:
    waiting = {i: s for i, s in states.items() if _MDL_STATE.search(s[0]) and not snap.waits_of(i)}
    if not waiting:
        return
    if dialect.lock_views_in_performance_schema:
        _mysql_metadata(cur, snap, dialect, waiting)
        return
    holders: list[tuple[int, str, str]] = []  # thread, mode, table
    try:
        cur.execute("SELECT COUNT(*) FROM information_schema.PLUGINS"
                    " WHERE PLUGIN_NAME = 'METADATA_LOCK_INFO' AND PLUGIN_STATUS = 'ACTIVE'")
        have = bool(cur.fetchone()[0])
        if have:
            cur.execute("SELECT THREAD_ID, LOCK_MODE, TABLE_SCHEMA, TABLE_NAME FROM information_schema.METADATA_LOCK_INFO")
            holders = [(int(t), str(m or ""), f"{s}.{n}" if n else str(m or "")) for t, m, s, n in cur.fetchall()]
    except pymysql.MySQLError:
        have = False
    if not have:
        snap.notes.append("MariaDB names no metadata-lock holder here: the METADATA_LOCK_INFO plugin is not loaded "
                          "(INSTALL SONAME 'metadata_lock_info' adds it)")
    for ident, (state, text, ms) in sorted(waiting.items()):
        global_lock = re.search(r"backup|global read", state, re.IGNORECASE)
        tables = [t for _, _, t in holders if "." in t and re.search(rf"\b{re.escape(t.split('.', 1)[1])}\b", text,
                                                                       re.IGNORECASE)]
        table = tables[0] if tables else _named_table(text)
        bare = table.split(".")[-1]
        lock = "the global read lock" if global_lock else f"metadata lock on {table or 'a table'}"
        # a statement that is not DDL waits for a metadata lock only behind DDL: the DDL queued
        # ahead of it (an ALTER that waits itself) is what blocks it
        ahead = [] if global_lock or _DDL.match(text) else [
            o for o, (s2, t2, ms2) in waiting.items()
            if o != ident and _DDL.match(t2) and ms2 >= ms and bare and re.search(rf"\b{re.escape(bare)}\b", t2, re.I)]
        if ahead:
            for o in ahead:
                who = snap.label(o)
                snap.waits.append(Wait(ident, o, lock, "", ms, True, "",
                                       f"{lock}: requested ({state}); queued behind {who}'s pending request", "metadata"))
            continue
        if global_lock:
            found = sorted({t for t, m, _ in holders if m.startswith("MDL_BACKUP_FTWRL") and t != ident})
        else:
            found = sorted({t for t, m, tb in holders if tb == table and t != ident and t not in
                            [o for o in waiting if o != ident and not _DDL.match(waiting[o][1])]})
        if not found:
            snap.waits.append(Wait(ident, None, lock, "", ms, False, "",
                                   f"{lock}: requested ({state}); the server does not say who holds it", "metadata"))
        for t in found:
            who = snap.label(t)
            modes = ", ".join(sorted({m for h, m, tb in holders if h == t and (tb == table or global_lock)}))
            snap.waits.append(Wait(ident, t, lock, "", ms, False, modes,
                                   f"{lock}: requested ({state}); {who} holds it ({modes})", "metadata"))


def _mysql_metadata(cur, snap: Snapshot, dialect: MySQLFamilyDialect, waiting) -> None:
    try:
        cur.execute(dialect.lock_view("server_metadata_waits"))
        rows = cur.fetchall()
    except pymysql.MySQLError as exc:
        snap.notes.append(f"metadata locks not readable (performance_schema.metadata_locks): "
                          f"{exc.args[-1] if exc.args else exc}")
        return
    for pid, otype, schema, name, ptype, other, gtype, gstatus in rows:
        pid, other = int(pid), int(other)
        if pid not in waiting:
            continue
        queued = gstatus == "PENDING"
        conflicts = (_PENDING_CONFLICTS if queued else _GRANTED_CONFLICTS).get(str(ptype), set(_MDL))
        if gtype not in conflicts or (queued and waiting.get(other, ("", "", 0))[2] < waiting[pid][2]):
            continue  # no conflict, or a pending request younger than this one
        who = snap.label(other)
        lock = f"metadata lock on {schema}.{name}" if name else f"metadata lock ({otype})"
        how = f"queued behind {who}'s pending request ({gtype})" if queued else f"{who} holds it ({gtype})"
        snap.waits.append(Wait(pid, other, lock, str(ptype), waiting[pid][2], queued, "" if queued else str(gtype),
                               f"{lock}: {ptype} requested; {how}", "metadata"))


_TABLE_IN = re.compile(r"\b(?:FROM|UPDATE|INTO|TABLE|JOIN)\s+((?:`?\w+`?\.)?`?[A-Za-z_][\w$]*`?)", re.IGNORECASE)


def _named_table(text: str) -> str:
    m = _TABLE_IN.search(text or "")
    return m.group(1).replace("`", "") if m else ""
