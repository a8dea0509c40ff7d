"""Which server a race runs on: a private one lockrace starts, or a DSN.

Order of choice for each engine: the ``--pg`` / ``--mysql`` flag, then the
``LOCKRACE_PG_DSN`` / ``LOCKRACE_MYSQL_DSN`` environment variable, then a
private server (embedded PostgreSQL 18 from the wheel; MariaDB/MySQL from
``mariadbd`` / ``mysqld`` on PATH).  On a server lockrace did not start it
works only inside its own schema (PostgreSQL) or database (MySQL family):
by default a fresh one per lockrace process (``lockrace_`` and a random
suffix), or the one ``LOCKRACE_SANDBOX`` names (see backends/sandbox.py).
"""

from __future__ import annotations

import os
import re
import secrets
from dataclasses import dataclass, field
from urllib.parse import parse_qs, unquote, urlsplit

from ..registry import ENGINES, Engine
from .process import PrivateServer
from ..core.rows import one

PG_ENV = ENGINES[Engine.POSTGRES].env
MYSQL_ENV = ENGINES[Engine.MYSQL].env
SANDBOX_ENV = "LOCKRACE_SANDBOX"
DEFAULT_SANDBOX = "lockrace"


class DsnError(Exception):
    """A DSN lockrace cannot use; the message never contains the password."""


@dataclass
class Target:
    family: str  # postgres | mysql (registry.Family: the driver and the SQL it speaks)
    origin: str  # "embedded", "private" or "DSN"
    conninfo: str = ""  # PostgreSQL conninfo / URI
    mysql_kwargs: dict = field(default_factory=dict)
    sandbox: str = DEFAULT_SANDBOX
    server: PrivateServer | None = None
    joins: bool = False
    """A further node of a cluster on DSNs: the first node's backend created and
    owns the sandbox (replicated here); this one only uses it."""
    hot_standby: bool = False
    """The standby node of a primary + hot standby cluster: in recovery, read-only,
    and meant to be.  Any other PostgreSQL target found in recovery is refused."""

    @property
    def owned(self) -> bool:
        return self.server is not None

    def describe(self) -> str:
        """Where the server is, without any password."""
        if self.family == "postgres":
            return redact(self.conninfo)
        kw = self.mysql_kwargs
        where = kw.get("unix_socket") or f"{kw.get('host', 'localhost')}:{kw.get('port', 3306)}"
        return f"mysql://{kw.get('user', '')}@{where}"

    def stop(self, timeout: float = 10.0) -> None:
        if self.server is not None:
            self.server.stop(timeout)


def standby_refused(where: str) -> str:
    """The sentence for a PostgreSQL server in recovery given where a primary is needed."""
    return (f"{where} is a hot standby (pg_is_in_recovery() is true), read-only: lockrace needs a primary to"
            " create its sandbox on; give the primary's DSN, or both to --engine postgres-standby with"
            " --standby PRIMARY_URI,STANDBY_URI")


def standby_refusal(dsn: str) -> str | None:
    """The sentence refusing ``dsn`` when it is a PostgreSQL hot standby; None for a
    primary, or for a server that cannot be asked now (the ordinary open says why)."""
    try:
        import psycopg

        with psycopg.connect(dsn, connect_timeout=5, autocommit=True, application_name="lockrace check") as conn:
            in_recovery = bool(one(conn.execute("SELECT pg_is_in_recovery()").fetchone())[0])
    except Exception:
        return None
    return standby_refused(redact(dsn)) if in_recovery else None


def sandbox_name() -> str:
    """The sandbox on a DSN server: LOCKRACE_SANDBOX, or a fresh name each time."""
    name = os.environ.get(SANDBOX_ENV) or f"{DEFAULT_SANDBOX}_{secrets.token_hex(4)}"
    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,40}", name):
        raise DsnError(f"{SANDBOX_ENV} must be a plain lower-case identifier, got {name!r}")
    return name


def pg_options(conninfo: str, *ours: str) -> str:
    """The libpq ``options`` for one of lockrace's connections to ``conninfo``.

    Passing ``options=`` to libpq replaces the user's own: the DSN's
    ``options`` (``-c role=reporting``, ``-c default_transaction_read_only=on``)
    or, where the DSN has none, the ``PGOPTIONS`` environment variable -- the
    one libpq itself would use.  Those come first and lockrace's own
    settings are appended (for a setting given twice the later one counts, so
    lockrace's search_path and bounds hold); everything else the user chose
    stays as psql with the same DSN would have it."""
    import psycopg.conninfo

    try:
        params = psycopg.conninfo.conninfo_to_dict(conninfo)
    except Exception:  # not parsed here: libpq says why when it connects
        params = {}
    user = str(params["options"]) if "options" in params else os.environ.get("PGOPTIONS", "")
    return " ".join(part for part in (user, *ours) if part and part.strip())


def redact(dsn: str) -> str:
    """Hide every password in a DSN (or in a message quoting one), as ``***``.

    The text is read the way libpq reads a connection string -- a URI
    (``postgresql://``, ``mysql://``, any scheme) with userinfo and
    percent-encoded query keys and values, or ``key=value`` pairs with quoted
    values and backslash escapes -- and the value of every key that names a
    secret (password, sslpassword, passwd, pwd; in any case, percent-encoded
    or not) is replaced.  Where the text does not parse, it errs on the side
    of hiding more: a URI's userinfo runs to the *last* '@', an unterminated
    quoted value runs to the end, and words that follow a secret without a
    ``key=`` of their own (``password=Hunter2 Xylophone99``) are hidden too.
    """
    if _URI_START.match(dsn.lstrip()):
        out = _redact_uri(dsn)
    else:
        out = _redact_pairs(dsn)
    # a URI quoted inside other text (a message, a dbname value): its userinfo
    return _URI_USERINFO.sub(r"\1***@", out)


_URI_START = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_URI_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]*:)\S*@")
_SPACE = " \t\n\r\f\v"  # libpq's isspace()


def is_secret_key(key: str) -> bool:
    """Does this connection-string key name a password (any case, percent-encoded or not)?"""
    for _ in range(4):  # %2577 -> %77 -> w: decode until it stops changing
        decoded = unquote(key)
        if decoded == key:
            break
        key = decoded
    key = key.strip().lower()
    return "pass" in key or "pwd" in key


def _redact_uri(uri: str) -> str:
    lead = len(uri) - len(uri.lstrip())
    scheme = _URI_START.match(uri[lead:])
    assert scheme is not None, "called for a URI only (see redact)"
    rest_at = lead + scheme.end()
    head, rest = uri[:rest_at], uri[rest_at:]
    # query parameters: key=value&..., keys and values percent-encoded
    q = rest.find("?")
    if q >= 0:
        params = rest[q + 1:].split("&")
        hiding = False
        for i, param in enumerate(params):
            key, eq, _ = param.partition("=")
            if eq:
                hiding = is_secret_key(key)
                if hiding:
                    params[i] = key + "=***"
            elif hiding:  # no '=': taken for more of the secret (an unencoded '&' in it)
                params[i] = "***"
        rest = rest[:q + 1] + "&".join(params)
    # userinfo: user:password@ -- the password runs to the last '@' (hide more)
    at = rest.rfind("@")
    colon = next((i for i, ch in enumerate(rest) if ch in ":/?@"), -1)
    if at >= 0 and colon >= 0 and rest[colon] == ":" and colon < at:
        rest = rest[:colon + 1] + "***" + rest[at:]
    return head + rest


def _redact_pairs(text: str) -> str:
    """key=value pairs as libpq's conninfo_parse() reads them."""
    out: list[str] = []
    i, n = 0, len(text)
    hiding = False  # the last value was a secret
    while i < n:
        start = i
        while i < n and text[i] in _SPACE:
            i += 1
        out.append(text[start:i])
        if i >= n:
            break
        key_at = i
        while i < n and text[i] not in _SPACE and text[i] != "=":
            i += 1
        key = text[key_at:i]
        j = i
        while j < n and text[j] in _SPACE:
            j += 1
        if j >= n or text[j] != "=":
            # a word without '=': libpq refuses the string; after a secret it may be more of it
            out.append("***" if hiding else key)
            continue
        j += 1
        while j < n and text[j] in _SPACE:
            j += 1
        value_at = j
        value, j = _conninfo_value(text, j)
        secret = is_secret_key(key)
        if secret:
            out.append(text[key_at:value_at] + "***")
        elif ("=" in value or "://" in value) and redact(value) != value:
            # dbname may itself be a whole connection string
            inner = redact(value).replace("\\", "\\\\").replace("'", "\\'")
            out.append(text[key_at:value_at] + f"'{inner}'")
        else:
            out.append(text[key_at:j])
        hiding = secret
        i = j
    return "".join(out)


def _conninfo_value(text: str, i: int) -> tuple[str, int]:
    """One value at text[i:]: quoted ('...' with backslash escapes, unterminated
    = to the end) or bare (up to whitespace, backslash escapes the next
    character).  Returns the value and the index after it."""
    n = len(text)
    buf: list[str] = []
    if i < n and text[i] == "'":
        i += 1
        while i < n:
            ch = text[i]
            if ch == "\\" and i + 1 < n:
                buf.append(text[i + 1])
                i += 2
            elif ch == "'":
                return "".join(buf), i + 1
            else:
                buf.append(ch)
                i += 1
        return "".join(buf), n
    while i < n and text[i] not in _SPACE:
        if text[i] == "\\" and i + 1 < n:
            buf.append(text[i + 1])
            i += 2
        else:
            buf.append(text[i])
            i += 1
    return "".join(buf), i


def pg_target(dsn: str | None) -> Target:
    dsn = dsn or os.environ.get(PG_ENV) or None
    if dsn is None:
        from .embedded_postgres import EmbeddedPostgres

        server = EmbeddedPostgres()
        server.start()
        return Target("postgres", "embedded", conninfo=server.conninfo(), sandbox=DEFAULT_SANDBOX, server=server)
    if dsn.startswith(("mysql://", "mariadb://")):
        raise DsnError(f"{redact(dsn)} is a MySQL DSN; give it with --mysql")
    try:
        import psycopg.conninfo

        psycopg.conninfo.conninfo_to_dict(dsn)
    except Exception:  # psycopg raises ProgrammingError with the DSN text in it
        raise DsnError(f"not a PostgreSQL DSN: {redact(dsn)} (try postgresql://user@host:5432/dbname)") from None
    return Target("postgres", "DSN", conninfo=dsn, sandbox=sandbox_name())


def mysql_target(dsn: str | None) -> Target:
    dsn = dsn or os.environ.get(MYSQL_ENV) or None
    if dsn is None:
        from .private_mysql import PrivateMySQL

        server = PrivateMySQL()
        server.start()
        return Target("mysql", "private", mysql_kwargs=server.connect_kwargs(), server=server)
    return Target("mysql", "DSN", mysql_kwargs=parse_mysql_dsn(dsn), sandbox=sandbox_name())


def parse_mysql_dsn(dsn: str) -> dict:
    """mysql://user:password@host:port/?unix_socket=/path (mariadb:// too)."""
    try:
        parts = urlsplit(dsn)
        port = parts.port
    except ValueError:
        raise DsnError(f"not a MySQL DSN: {redact(dsn)} (try mysql://root@127.0.0.1:3306)") from None
    if parts.scheme not in ("mysql", "mariadb"):
        raise DsnError(f"not a MySQL DSN: {redact(dsn)} (try mysql://root@127.0.0.1:3306)")
    kwargs: dict = {"user": unquote(parts.username or "root"), "password": unquote(parts.password or "")}
    query = parse_qs(parts.query)
    if "unix_socket" in query:
        kwargs["unix_socket"] = query["unix_socket"][0]
        kwargs["ssl_disabled"] = True  # no TLS on a local socket (PyMySQL would build an SSL context per connect)
    else:
        kwargs["host"] = parts.hostname or "127.0.0.1"
        kwargs["port"] = port or 3306
    kwargs.update(tls_options(query, dsn, local="unix_socket" in query))
    return kwargs


SSL_MODES = ("DISABLED", "PREFERRED", "REQUIRED", "VERIFY_CA", "VERIFY_IDENTITY")


def tls_options(query: dict, dsn: str, local: bool = False) -> dict:
    """PyMySQL's TLS arguments for a DSN's ``ssl-mode``, ``ssl-ca``, ``ssl-cert`` and
    ``ssl-key`` (named as the mysql client names them; ``ssl_mode`` and so on too).

    Without ``ssl-mode``: TLS when the server offers it (PREFERRED), as the mysql
    client does; with ``ssl-ca`` and no mode the certificate is verified (VERIFY_CA).
    REQUIRED and PREFERRED encrypt without checking who answers; VERIFY_CA checks
    the server's certificate against ``ssl-ca``; VERIFY_IDENTITY also its host name.
    A client certificate (``ssl-cert``, ``ssl-key``) makes TLS required.  One context is made here and shared by every connection (PyMySQL's own
    PREFERRED builds one per connection, tens of milliseconds of CPU each)."""
    def one(name: str) -> str | None:
        for key in (name, name.replace("-", "_")):
            if key in query:
                return query[key][-1]
        return None

    mode, ca, cert, key = one("ssl-mode"), one("ssl-ca"), one("ssl-cert"), one("ssl-key")
    if mode is None and ca is None and cert is None and key is None:
        return {}
    if mode is not None:
        mode = mode.strip().upper()
        if mode not in SSL_MODES:
            raise DsnError(f"ssl-mode={mode} in {redact(dsn)} is not one of {', '.join(SSL_MODES)}")
    else:
        mode = "VERIFY_CA" if ca else "PREFERRED"
    if mode == "DISABLED":
        return {"ssl_disabled": True}
    if mode.startswith("VERIFY") and not ca:
        raise DsnError(f"ssl-mode={mode} needs the certificate authority to verify the server against:"
                       f" add ssl-ca=/path/to/ca.pem to {redact(dsn)}")
    if local and mode != "PREFERRED":
        raise DsnError(f"ssl-mode={mode} over a Unix socket: lockrace uses no TLS on a local socket;"
                       f" give the server's host and port instead ({redact(dsn)})")
    if local or (mode == "PREFERRED" and not cert):
        return {}  # PyMySQL's own PREFERRED: TLS when the server offers it
    for label, path in (("ssl-ca", ca), ("ssl-cert", cert), ("ssl-key", key)):
        if path is not None and not os.path.isfile(path):
            raise DsnError(f"{label}={path} in {redact(dsn)} is not a readable file")
    if key and not cert:
        raise DsnError(f"ssl-key without ssl-cert in {redact(dsn)}: give the client certificate too")
    import ssl

    try:
        ctx = ssl.create_default_context(cafile=ca) if ca else ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.verify_flags &= ~getattr(ssl, "VERIFY_X509_STRICT", 0)  # MySQL's own certificates are not strict
        ctx.check_hostname = mode == "VERIFY_IDENTITY"
        ctx.verify_mode = ssl.CERT_REQUIRED if mode.startswith("VERIFY") else ssl.CERT_NONE
        if cert:
            ctx.load_cert_chain(cert, keyfile=key)
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise DsnError(f"the TLS files in {redact(dsn)} cannot be used: {exc}") from None
    return {"ssl": ctx}
