"""Everything lockrace does with PyMySQL's internals, behind public names.

PyMySQL only reads by blocking and has no public way to send a query without
reading its answer, to hand it bytes already taken off its socket, or to skip
decoding rows.  lockrace needs all three (mysql_answer.py reads short answers
on the event loop; mysql.py counts a huge result's rows without decoding
them; rehearse/connections.py reads answers packet by packet).  So the few
private members of PyMySQL that this takes (``_sock``, ``_rfile``,
``_next_seq_id``, ``_read_bytes``, ``_execute_command``,
``_read_query_result``, a cursor's ``_result`` and ``_do_get_result``) are
touched here and nowhere else; ``LOOP_DRIVER`` says whether this PyMySQL has
them (1.1 and 1.2 do).  Without them, or with ``LOCKRACE_READS=threaded``,
every statement runs on the session's thread through PyMySQL's public calls.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import time

import pymysql
import pymysql.connections
import pymysql.converters
import pymysql.cursors
import pymysql.protocol
from pymysql.constants import COMMAND

# the PyMySQL internals a send from the loop uses (1.1 and 1.2 have them)
LOOP_DRIVER = all(hasattr(pymysql.connections.Connection, name)
                  for name in ("_execute_command", "_read_query_result")) and all(
    hasattr(pymysql.cursors.SSCursor, name) for name in ("_do_get_result",))


class Packet(pymysql.connections.MysqlPacket):
    """Keeps the SQLSTATE of an error packet, which PyMySQL drops."""

    def raise_for_error(self):
        data = self._data
        sqlstate = data[4:9].decode("ascii", "replace") if data[3:4] == b"#" else "HY000"
        try:
            super().raise_for_error()
        except pymysql.MySQLError as exc:
            exc.sqlstate = sqlstate
            raise


def eof_status(payload: bytes) -> int | None:
    """The server's status flags in an EOF packet (None: not an EOF packet)."""
    if payload[:1] == b"\xfe" and 5 <= len(payload) < 9:
        return int.from_bytes(payload[3:5], "little")
    return None


class Connection(pymysql.connections.Connection):
    """PyMySQL's connection, which also takes the status flags of the EOF packet that
    ends a result set (PyMySQL keeps only an OK packet's): a SELECT that begins a
    transaction (autocommit off) says so only there."""

    def _read_packet(self, packet_type=Packet):
        if packet_type is pymysql.connections.MysqlPacket:
            packet_type = Packet
        packet = super()._read_packet(packet_type)
        status = eof_status(packet.get_all_data())
        if status is not None:
            self.server_status = status
        return packet

    def _create_ssl_ctx(self, sslp):
        # TLS when the server offers it, without checking its certificate (PyMySQL's own
        # PREFERRED, sslp == {}): one context for every connection, where PyMySQL would
        # build one per connection (40 ms of CPU each here, reading the system's CAs)
        if isinstance(sslp, dict) and not sslp:
            return preferred_context()
        return super()._create_ssl_ctx(sslp)


_PREFERRED_CTX = None


def preferred_context() -> ssl.SSLContext:
    global _PREFERRED_CTX
    if _PREFERRED_CTX is None:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        _PREFERRED_CTX = ctx
    return _PREFERRED_CTX


# Encoders for query arguments, but no decoders: values come back as the
# server's own text, as the mysql client would print them.
TEXT_CONV = {k: v for k, v in pymysql.converters.conversions.items() if not isinstance(k, int)}


def error_parts(exc: Exception) -> tuple[int | None, str]:
    """(errno, message) of a PyMySQL error (errno None: not the server's)."""
    args = exc.args
    if len(args) >= 2 and isinstance(args[0], int):
        return args[0], str(args[1])
    return None, str(exc) or type(exc).__name__


# ------------------------------------------------------------ the socket itself

def socket_of(conn: Connection):
    """The connection's socket (an ``ssl.SSLSocket`` over TLS); None once closed."""
    return conn._sock


def is_open(conn: Connection) -> bool:
    """PyMySQL's ``Connection.open``, one call less (this is on the answer's way)."""
    return conn._sock is not None


def shut(conn: Connection) -> None:
    """Shut ``conn``'s socket from another thread: a driver call blocked on it returns."""
    sock = getattr(conn, "_sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def raw_io(conn: Connection):
    """(send, read) on the connection's socket, past PyMySQL: ``send(bytes)`` writes
    it all, ``read(n)`` blocks for n bytes (fewer at the connection's end)."""
    return conn._sock.sendall, conn._rfile.read


# ----------------------------------------------------- a query sent, read later

def send_query(conn: Connection, data: bytes) -> None:
    """Send one COM_QUERY of ``data`` without reading its answer (a short write into
    the socket's buffer); ``read_sent`` or ``take_error`` reads it."""
    conn._execute_command(COMMAND.COM_QUERY, data)


def read_sent(conn: Connection, cur, sql: str) -> None:
    """Read the answer to ``sql``, sent by ``send_query``, into the unbuffered cursor
    ``cur``, as ``cur.execute(sql)`` would have."""
    cur._executed = sql  # as cursor.execute notes it (fetches check it)
    conn._affected_rows = conn._read_query_result(unbuffered=True)
    cur._do_get_result()


def take_error(conn: Connection, packet: bytes) -> None:
    """The whole answer was the error ``packet`` (header included), taken off the
    socket: the connection as after PyMySQL's own read of it."""
    conn._next_seq_id = (packet[3] + 1) % 256
    conn._result = None


def warning_count(cur) -> int:
    """How many warnings the cursor's last result set came with."""
    return getattr(getattr(cur, "_result", None), "warning_count", 0) or 0


def end_unbuffered(cur) -> None:
    """The socket died under an unbuffered result: nothing more will come on it."""
    result = getattr(cur, "_result", None)
    if result is not None:
        result.unbuffered_active = False


class Replay:
    """PyMySQL's reader of the socket, with the bytes the loop already took off
    it in front: PyMySQL reads those first, then the socket as before (the
    reader puts itself back once they are read)."""

    __slots__ = ("data", "pos", "conn", "rest")

    def __init__(self, data: bytes, conn):
        self.data, self.pos, self.conn, self.rest = data, 0, conn, conn._rfile

    def read(self, n: int) -> bytes:
        start, end = self.pos, self.pos + n
        taken = self.data[start:end]
        self.pos = min(end, len(self.data))
        if self.pos == len(self.data) and self.conn._rfile is self:
            self.conn._rfile = self.rest
        if len(taken) < n:
            taken += self.rest.read(n - len(taken))
        return taken

    def close(self) -> None:
        self.rest.close()


def replay(conn: Connection, data: bytes) -> None:
    """PyMySQL's next reads of ``conn`` get ``data`` (taken off its socket) first."""
    conn._rfile = Replay(data, conn)


def count_rest(cur) -> int:
    """Read the rest of an unbuffered result set off the socket, counting rows without
    decoding them: packet headers only (PyMySQL would build a packet object and a tuple
    per row, and hold the GIL against the UI thread far longer).  An error packet
    (KILL QUERY, a statement timeout) raises as it would from a fetch."""
    result = cur._result
    if result is None or not result.unbuffered_active:
        return 0
    conn = result.connection
    read = conn._read_bytes  # raises OperationalError 2013 (and closes) if the socket fails
    n = 0
    while True:
        header = read(4)
        length = header[0] | header[1] << 8 | header[2] << 16
        if header[3] != conn._next_seq_id:
            conn._force_close()
            raise pymysql.err.OperationalError(2013, "Lost connection to MySQL server during query")
        conn._next_seq_id = (header[3] + 1) % 256
        payload = read(length)
        more = length
        while more == 0xFFFFFF:  # a row of 16 MiB or more continues in the next packets
            header = read(4)
            more = header[0] | header[1] << 8 | header[2] << 16
            conn._next_seq_id = (header[3] + 1) % 256
            read(more)
        if payload[:1] == b"\xff":
            result.unbuffered_active = False
            Packet(payload, conn.encoding).raise_for_error()
        if payload[:1] == b"\xfe" and length < 9:  # EOF: the end of this result set
            status = eof_status(payload)
            if status is not None:
                conn.server_status = status
            result._check_packet_is_eof(pymysql.protocol.MysqlPacket(payload, conn.encoding))
            result.unbuffered_active = False
            result.connection = None
            return n
        n += 1
        if not n & 255:
            time.sleep(0)  # hand the GIL to the UI thread now and then
