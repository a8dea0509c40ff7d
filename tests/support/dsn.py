"""Servers the fault tests give to lockrace by DSN: "a server lockrace did not start".

Where the tests are developed, PostgreSQL 15 answers on 127.0.0.1:5432 (trust)
and MariaDB 10.11 on 127.0.0.1:3306 (root, no password): those are used.
Where they do not answer (a fresh CI machine), the test session's own private
servers are used instead, reached by DSN over their Unix sockets -- for the
``lockrace`` process under test that is just as much a server it did not
start (origin "DSN": its own sandbox only, dropped afterwards).
FAULT_TESTS_PRIVATE_DSN=1 takes that path even where the local servers answer.

In the MySQL pass (LOCKRACE_MYSQLD names a MySQL server) the local MariaDB is
not the server under test: the MySQL DSN is then a private MySQL of the test
session's own on a loopback port, where it offers TLS as a MySQL server does by
default, so every DSN test also runs over TLS on MySQL.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import psycopg
import pymysql
import pytest
from support.flavor import private_mysql_flavor

from lockrace.servers.private_mysql import PrivateMySQL

LOCAL_PG = "host=127.0.0.1 port=5432 user=postgres"
LOCAL_MYSQL = {"host": "127.0.0.1", "port": 3306, "user": "root", "password": ""}


@dataclass
class PgDsn:
    base: str  # libpq key=value without dbname
    where: str

    def dsn(self, dbname: str = "postgres") -> str:
        return f"{self.base} dbname={dbname}"

    def connect(self, dbname: str = "postgres") -> psycopg.Connection:
        return psycopg.connect(self.dsn(dbname), autocommit=True, application_name="fault-check", connect_timeout=5)


@dataclass
class MySQLDsn:
    kwargs: dict  # PyMySQL connect arguments for root
    user_host: str  # the host part of accounts that log in this way: '127.0.0.1' or 'localhost'
    where: str
    name: str = "MariaDB"  # how lockrace names the server: 'MariaDB' or 'MySQL'

    def dsn(self, user: str = "root", password: str = "", database: str = "") -> str:
        auth = f"{user}:{password}" if password else user
        if "unix_socket" in self.kwargs:
            return f"mysql://{auth}@localhost/{database}?unix_socket={self.kwargs['unix_socket']}"
        return f"mysql://{auth}@{self.kwargs['host']}:{self.kwargs['port']}" + (f"/{database}" if database else "")

    def connect(self) -> pymysql.connections.Connection:
        return pymysql.connect(**self.kwargs, autocommit=True, connect_timeout=5)


def _answers(connect) -> bool:
    if os.environ.get("FAULT_TESTS_PRIVATE_DSN"):  # exercise the CI path where the local servers answer too
        return False
    try:
        connect().close()
        return True
    except Exception:
        return False


@pytest.fixture(scope="session")
def pg_dsn(request) -> PgDsn:
    local = PgDsn(LOCAL_PG, "127.0.0.1:5432")
    if _answers(local.connect):
        return local
    server = request.getfixturevalue("pg_server")
    return PgDsn(f"host={server.server.dir} port=5432 user=postgres", "the tests' private PostgreSQL")


@pytest.fixture(scope="session")
def mysql_dsn(request) -> MySQLDsn:
    if private_mysql_flavor() == "mysql":
        server = request.getfixturevalue("mysql_tcp_server")
        # root@localhost is the account MySQL makes; a TCP client from 127.0.0.1 is
        # 'localhost' to it (the private server resolves names)
        return MySQLDsn(server.connect_kwargs(), "localhost", "the tests' private MySQL over TLS", "MySQL")
    local = MySQLDsn(dict(LOCAL_MYSQL), "127.0.0.1", "127.0.0.1:3306")
    if _answers(local.connect):
        return local
    server = request.getfixturevalue("mysql_server")
    kwargs = {k: v for k, v in server.mysql_kwargs.items() if k in ("unix_socket", "user", "password")}
    return MySQLDsn(kwargs, "localhost", "the tests' private MariaDB")


@pytest.fixture(scope="session")
def mysql_tcp_server():
    """The test session's private MySQL on a loopback port (TLS on, as MySQL has it)."""
    server = PrivateMySQL(tcp=True)
    server.start()
    yield server
    server.stop()
