"""Which private MySQL-family server the tests run on (LOCKRACE_MYSQLD chooses)."""

from __future__ import annotations

import os

from lockrace.servers.process import ServerStartError


def private_mysql_flavor() -> str | None:
    """'mariadb' or 'mysql': the private MySQL-family server the tests start; None
    when there is none (or the tests use LOCKRACE_MYSQL_DSN)."""
    if os.environ.get("LOCKRACE_MYSQL_DSN"):
        return None
    from lockrace.servers.private_mysql import find_server_binary

    try:
        return find_server_binary()[0]
    except ServerStartError:
        return None


def private_server_name() -> str:
    """'MySQL' or 'MariaDB': how lockrace names the private MySQL-family server."""
    return "MySQL" if private_mysql_flavor() == "mysql" else "MariaDB"
