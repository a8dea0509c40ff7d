"""TLS on MySQL-family DSNs: ssl-mode, ssl-ca, ssl-cert and ssl-key, named as the mysql
client names them, on a private server of this module's own on a loopback port (MySQL
offers TLS there with the certificates it made itself; MariaDB 10.11 offers none)."""

from __future__ import annotations

import shutil
import ssl

import pymysql
import pytest
from support.cli import lockrace_env, run_lockrace

from lockrace.backends import open_backend
from lockrace.backends.base import ConnectError
from lockrace.engine.race import Race
from lockrace.lab.overhead import transport_of
from lockrace.servers.private_mysql import PrivateMySQL
from lockrace.servers.target import DsnError, mysql_target, parse_mysql_dsn


@pytest.fixture(scope="module")
def tcp_server(tmp_path_factory):
    """(the server, its DSN, a copy of its CA certificate or None)."""
    server = PrivateMySQL(tcp=True)
    server.start()
    try:
        ca = server.dir / "data" / "ca.pem"
        copy = None
        if ca.exists():
            copy = tmp_path_factory.mktemp("tls") / "ca.pem"
            shutil.copyfile(ca, copy)
        yield server, f"mysql://root@127.0.0.1:{server.port}", copy
    finally:
        server.stop()


def test_ssl_options_are_read_as_the_mysql_client_names_them(tmp_path):
    assert parse_mysql_dsn("mysql://u@h/?ssl-mode=DISABLED")["ssl_disabled"] is True
    assert parse_mysql_dsn("mysql://u@h/?ssl_mode=disabled")["ssl_disabled"] is True
    assert "ssl" not in parse_mysql_dsn("mysql://u@h/?ssl-mode=PREFERRED")  # PyMySQL's own: TLS when offered
    required = parse_mysql_dsn("mysql://u@h/?ssl-mode=REQUIRED")["ssl"]
    assert isinstance(required, ssl.SSLContext) and required.verify_mode == ssl.CERT_NONE
    # one sentence each, never the password
    for dsn, words in [
        ("mysql://u:Secret1@h/?ssl-mode=VERIFY_CA", "needs the certificate authority"),
        ("mysql://u:Secret1@h/?ssl-mode=VERIFY_IDENTITY", "needs the certificate authority"),
        ("mysql://u:Secret1@h/?ssl-mode=sometimes", "is not one of DISABLED, PREFERRED"),
        (f"mysql://u:Secret1@h/?ssl-mode=VERIFY_CA&ssl-ca={tmp_path}/none.pem", "is not a readable file"),
        ("mysql://u:Secret1@h/?unix_socket=/tmp/s&ssl-mode=REQUIRED", "over a Unix socket"),
    ]:
        with pytest.raises(DsnError) as info:
            parse_mysql_dsn(dsn)
        assert words in str(info.value) and "Secret1" not in str(info.value), str(info.value)


def test_verify_ca_without_a_ca_is_one_sentence_and_exit_2(tmp_path):
    done = run_lockrace(["run", "--engine", "mysql", "--mysql", "mysql://root:Secret1@127.0.0.1:9/?ssl-mode=VERIFY_CA",
                         "mysql-nowait"], lockrace_env(tmp_path))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "ssl-mode=VERIFY_CA needs the certificate authority" in lines[0], done.stderr
    assert "Traceback" not in done.stderr and "Secret1" not in done.stderr


async def _race_on(dsn: str):
    backend = await open_backend(mysql_target(dsn))
    race = await Race(backend, ["A", "B"]).open()
    return backend, race


async def test_each_ssl_mode_on_the_server(tcp_server):
    server, dsn, ca = tcp_server
    offers_tls = server.flavor == "mysql"
    modes = {"DISABLED": False, "PREFERRED": offers_tls}
    if offers_tls:
        modes.update({"REQUIRED": True, f"VERIFY_CA&ssl-ca={ca}": True})
    for mode, encrypted in modes.items():
        backend, race = await _race_on(f"{dsn}/?ssl-mode={mode}")
        try:
            sock = race.sessions["A"].conn.conn._sock
            assert isinstance(sock, ssl.SSLSocket) == encrypted, (mode, type(sock))
            assert transport_of(race.sessions["A"].conn.conn).startswith("TLS (TLSv1.") == encrypted
            # a race over it: A holds the row, B's NOWAIT is refused, read on the loop through TLS
            await backend.run_admin(["CREATE TABLE tls_rows (id int PRIMARY KEY) ENGINE=InnoDB",
                                     "INSERT INTO tls_rows VALUES (1)"])
            await race.run("A", "BEGIN")
            await race.run("A", "SELECT id FROM tls_rows WHERE id = 1 FOR UPDATE")
            res = await race.run("B", "SELECT id FROM tls_rows WHERE id = 1 FOR UPDATE NOWAIT")
            assert res.outcome == "refused", (mode, res)
            assert res.code == ("3572" if server.flavor == "mysql" else "1205")
            await race.run("A", "COMMIT")
            # answers of one TLS record and of several (read on the loop, or handed to the thread)
            for n in (3, 600, 4000):
                digits = " UNION ALL ".join(f"SELECT {d} AS i" for d in range(10))
                rows = await race.run("B", f"WITH d AS ({digits}) SELECT REPEAT('x', 20) AS pad"
                                           f" FROM d a, d b, d c, d e LIMIT {n}")
                assert rows.outcome == "ok" and rows.total_rows == n, (mode, n, rows.outcome, rows.total_rows)
                assert rows.rows[0][0] == "x" * 20
            one = await race.run("B", "SELECT 1 AS one")
            assert one.outcome == "ok" and [list(r) for r in one.rows] == [["1"]], one
        finally:
            await race.close()
            await backend.drop_sandbox()
    if offers_tls:
        # MySQL's own certificates name no host: VERIFY_IDENTITY refuses them, as it should
        with pytest.raises((ConnectError, pymysql.err.OperationalError)) as info:
            await _race_on(f"{dsn}/?ssl-mode=VERIFY_IDENTITY&ssl-ca={ca}")
        assert "CERTIFICATE_VERIFY_FAILED" in str(info.value) or "certificate" in str(info.value).lower()
    else:
        # TLS required of a server that offers none: it cannot connect, and says so
        with pytest.raises((ConnectError, pymysql.err.OperationalError)):
            await _race_on(f"{dsn}/?ssl-mode=REQUIRED")
