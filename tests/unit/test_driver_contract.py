"""The engine asks of a session's connection and of a monitor only what
lockrace/backends/base.py declares (SessionConnection, MonitorConnection), and
PostgreSQL's and MariaDB/MySQL's drivers implement all of it."""

from __future__ import annotations

import ast
import inspect

from support.paths import REPO

from lockrace.backends.base import MonitorConnection, SessionConnection
from lockrace.backends.mysql import MySQLMonitor, MySQLSession
from lockrace.backends.postgres import PostgresMonitor, PostgresSession

ENGINE = REPO / "lockrace" / "engine"


def _public(cls) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_")} | set(getattr(cls, "__annotations__", {}))


def _asked_of(holder: str) -> set[str]:
    """Every attribute the engine takes of something named ``holder`` (``s.conn.x``, ``self.monitor.x``)."""
    asked = set()
    for path in ENGINE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute):
                owner = node.value
                name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", None)
                if name == holder:
                    asked.add(node.attr)
    return asked


def test_the_engine_asks_only_what_the_contract_declares():
    assert _asked_of("conn") <= _public(SessionConnection), _asked_of("conn") - _public(SessionConnection)
    assert _asked_of("monitor") <= _public(MonitorConnection), _asked_of("monitor") - _public(MonitorConnection)
    assert {"execute", "send", "ident", "close", "closed"} <= _asked_of("conn")
    assert {"waits", "cancel"} <= _asked_of("monitor")


def test_both_drivers_implement_all_of_it():
    for cls, base in ((PostgresSession, SessionConnection), (MySQLSession, SessionConnection),
                      (PostgresMonitor, MonitorConnection), (MySQLMonitor, MonitorConnection)):
        assert issubclass(cls, base)
        assert not inspect.isabstract(cls), (cls, cls.__abstractmethods__)
        for name in _public(base):
            assert hasattr(cls, name) or name in ("ident", "snapshot_ns"), (cls, name)
        assert inspect.iscoroutinefunction(cls.close)
    assert inspect.iscoroutinefunction(PostgresSession.execute) and inspect.iscoroutinefunction(MySQLSession.execute)
    assert inspect.iscoroutinefunction(PostgresMonitor.cancel) and inspect.iscoroutinefunction(MySQLMonitor.waits)
