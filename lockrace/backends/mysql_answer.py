"""A MariaDB/MySQL answer read on the event loop when it is already whole.

PyMySQL only reads by blocking, so a session's statements run on its own
thread (see worker.py).  But most answers in a lock race are one short packet
(a refusal, a lock wait timeout, "Query OK") or a few rows, and each trip
through the thread costs a caller two thread wake-ups: on a virtual machine,
0.1-0.4 ms after a quiet spell.  So a short statement is sent from the loop
(a few bytes into the socket's buffer, which never waits), the loop watches
the socket as a bare driver call would, and when it turns readable the loop
takes what has arrived (one non-blocking read).  A lone error packet (a
refusal, a lock wait timeout, a deadlock) is read right there, without
PyMySQL's exception machinery.  Any other whole answer that needs nothing
more (no further result sets, no warnings to read back) is parsed by PyMySQL
on the loop, from those bytes: nothing waits.  Anything else (rows still
streaming in, a long answer, warnings) goes to the session's thread, which
reads the taken bytes first, then the socket, and times the rest as before.

Measured (``lockrace bench --overhead --engine mysql``, private MariaDB
10.11, 30 runs, eight runs of the bench): a NOWAIT refusal +0.02 to +0.06 ms
over bare PyMySQL where the thread's way was +0.23 to +0.26 ms; a 1 s
innodb_lock_wait_timeout -0.07 to +0.14 ms (6 of 8 runs within 0.1 ms) where
it was +0.88 to +0.92 ms (on a later machine the 1 s wait is +0.14 to +0.17
ms, and a refusal over TLS +0.04 to +0.15 ms: see docs/benchmarks.md).  After
a second of sleep each line of Python on the way costs one to two
microseconds: so the lone error's way here makes no cursor and builds its
result without the 27-field constructor
(StatementResult.server_error), and the loop is kept awake while an answer is
due (loop_answer.AWAKE_TICK_S).

The statement's time ends when the answer arrived (arrival.py), not when the
loop got round to it.

Over TLS (MySQL offers it by default, and PyMySQL takes it on a TCP
connection) the socket is an ``ssl.SSLSocket``, which takes no flags to its
reads and keeps decrypted bytes the socket no longer shows as readable: the
loop reads it non-blocking for the moment, a record at a time until no
decrypted byte is left (``arrived``; not one read more, which could only
raise), so nothing decrypted stays behind unread, and a TLS record that has
only partly come in is a wake-up with nothing yet, as on a plain socket.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from time import perf_counter_ns
from typing import TYPE_CHECKING

from pymysql.constants import SERVER_STATUS

from ..core.events import StatementResult
from .arrival import take as take_arrival
from .loop_answer import LoopAnswer
from .pymysql_adapter import replay, socket_of

if TYPE_CHECKING:
    from .mysql import MySQLSession

PEEK_BYTES = 16384  # a longer answer is read on the session's thread
GET_READY_S = 0.001
_MORE_RESULTS = SERVER_STATUS.SERVER_MORE_RESULTS_EXISTS
_DONTWAIT = socket.MSG_DONTWAIT


def arrived(sock) -> bytes:
    """What has arrived on ``sock`` (up to PEEK_BYTES), without waiting: b"" at its end,
    BlockingIOError where nothing has come yet."""
    if not isinstance(sock, ssl.SSLSocket):
        return sock.recv(PEEK_BYTES, _DONTWAIT)
    timeout = sock.gettimeout()
    chunks: list[bytes] = []
    size, ended = 0, False
    sock.setblocking(False)
    try:
        while size < PEEK_BYTES:  # one TLS record a read
            try:
                chunk = sock.recv(PEEK_BYTES - size)
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                break
            if not chunk:
                ended = True
                break
            chunks.append(chunk)
            size += len(chunk)
            if not sock.pending():
                # nothing decrypted is left behind; an answer in more than one record
                # (rare below PEEK_BYTES: the server writes a short answer at once) is
                # not whole here and goes to the thread, which reads the rest
                break
    finally:
        sock.settimeout(timeout)
    if not chunks and not ended:
        raise BlockingIOError  # a record not yet whole, or only TLS's own (a session ticket)
    return b"".join(chunks)


def _packets(buf: bytes):
    """(payload, end) for each whole packet at the start of ``buf``."""
    pos, n = 0, len(buf)
    while pos + 4 <= n:
        length = buf[pos] | buf[pos + 1] << 8 | buf[pos + 2] << 16
        end = pos + 4 + length
        if end > n or length == 0xFFFFFF:  # cut off, or a 16 MiB packet continued in the next
            return
        yield buf[pos + 4:end], end
        pos = end


def _lenenc(data: bytes, pos: int) -> tuple[int, int]:
    first = data[pos]
    if first < 0xFB:
        return first, pos + 1
    size = {0xFC: 2, 0xFD: 3, 0xFE: 8}.get(first)
    if size is None:
        raise ValueError("not a length-encoded integer")
    return int.from_bytes(data[pos + 1:pos + 1 + size], "little"), pos + 1 + size


def whole_answer(buf: bytes) -> bool:
    """Whether ``buf`` (what has arrived, peeked) is exactly one whole answer to a
    query that leaves nothing more to read or ask: an error; an OK; or one result
    set to its closing EOF (or an error among its rows).  False for anything with
    further result sets or warnings, anything cut off, and anything unexpected."""
    end, eofs = 0, 0
    for i, (payload, end) in enumerate(_packets(buf)):
        head = payload[:1]
        if head == b"\xff":  # an error ends the answer
            return end == len(buf)
        if i == 0:
            if head == b"\x00":  # OK: affected rows, insert id, status, warnings
                try:
                    _, pos = _lenenc(payload, 1)
                    _, pos = _lenenc(payload, pos)
                except (ValueError, IndexError):
                    return False
                if len(payload) < pos + 4:
                    return False
                status = int.from_bytes(payload[pos:pos + 2], "little")
                warnings = int.from_bytes(payload[pos + 2:pos + 4], "little")
                return not status & _MORE_RESULTS and not warnings and end == len(buf)
            if head in (b"\xfb", b"\xfe") or not head:  # LOAD DATA LOCAL, or not a column count
                return False
            continue
        if head == b"\xfe" and len(payload) < 9:  # EOF: after the columns, then after the rows
            eofs += 1
            if eofs == 2:
                if len(payload) < 5:
                    return False
                warnings = int.from_bytes(payload[1:3], "little")
                status = int.from_bytes(payload[3:5], "little")
                return not status & _MORE_RESULTS and not warnings and end == len(buf)
    return False


class LoopRead(LoopAnswer):
    """One answer to a statement sent from the loop: read there if it is whole
    and short, otherwise by the session's thread.  Holds the session's
    connection lock until the answer is read to its end."""

    __slots__ = ("session", "sql", "t0", "outcome_1205", "commits_first", "_ready")

    def __init__(self, session: "MySQLSession", sql: str, t0: int, loop: asyncio.AbstractEventLoop,
                 on_answer=None):
        super().__init__(loop, on_answer)
        self.session, self.sql, self.t0 = session, sql, t0
        self.outcome_1205: str | None = None
        self.commits_first: bool | None = None
        # what a lock wait timeout would mean, and whether the statement commits before it
        # runs (the session's state after an error), worked out once the loop has slept:
        # not now, while the server needs the CPU for the statement just sent
        self._ready: asyncio.TimerHandle | None = loop.call_later(GET_READY_S, self._get_ready)

    def _get_ready(self) -> None:
        self._ready = None
        self.outcome_1205 = self.session.lock_error_outcome(self.sql)
        self.commits_first = self.session.commits_first(self.sql)

    def readable(self) -> None:
        now = perf_counter_ns()
        session = self.session
        seen = take_arrival(session.arrival_signal)
        if self.t0 < seen < now:
            now = seen  # the loop was busy when it came
        sock = socket_of(session.conn)
        try:
            buf = arrived(sock) if sock is not None else b""
        except (BlockingIOError, InterruptedError):
            return  # nothing after all: the next wake-up
        except OSError:
            buf = b""  # the thread's read says what went wrong
        if self._ready is not None:
            self._ready.cancel()
            self._ready = None
        lone_error = len(buf) > 4 and buf[4] == 0xFF and len(buf) == 4 + (buf[0] | buf[1] << 8 | buf[2] << 16)
        if not lone_error:
            if buf:  # PyMySQL reads what was taken off the socket first
                replay(session.conn, buf)
            if len(buf) >= PEEK_BYTES or not whole_answer(buf):
                self._hand_over()
                return
        session.reading = None
        try:
            if lone_error:  # the usual refusal or lock wait timeout: read without PyMySQL (or a cursor)
                result = session.take_lone_error(self.sql, buf, self.t0, now, self.outcome_1205)
            else:
                result = session.run_timed(self.sql, self.t0, now)
        except BaseException as exc:  # a bug: never left to the loop
            result = StatementResult("error", message=f"{type(exc).__name__}: {exc}", started_ns=self.t0,
                                     elapsed_ns=now - self.t0)
        if session.settle_status(result, self.sql, self.commits_first):
            # the error packet leaves the session's state unknown: read it back on the thread
            rest = session.thread().submit(session.release_then, result)
            rest.add_done_callback(self._from_thread)
            return
        session.conn_lock.release()
        self._settle(result)

    def _hand_over(self) -> None:
        session = self.session
        session.reading = None
        session.unwatch()  # the thread reads the socket now; the loop must not wake on it
        rest = session.thread().submit(session.execute_blocking, self.sql, self.t0)
        rest.add_done_callback(self._from_thread)

    def abandon(self) -> None:
        """The session closes while its answer is still awaited."""
        if self._ready is not None:
            self._ready.cancel()
            self._ready = None
        self.session.reading = None
        self.session.conn_lock.release()
        self._settle(StatementResult("connection_lost", message="the session was closed"))
