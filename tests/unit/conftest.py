"""Tests that need no server at all (marker: unit): ``pytest tests/unit`` runs in well
under a minute on a machine with no database. A test here that names a server fixture
fails at collection, and one that starts a private server fails when it tries."""

import pytest
from support.markers import folder_marker
from support.servers import SERVER_FIXTURES

_mark = folder_marker("unit")


def pytest_itemcollected(item):
    _mark(item)
    named = SERVER_FIXTURES & set(getattr(item, "fixturenames", ()))
    if named:
        raise pytest.UsageError(f"{item.nodeid} is in tests/unit but uses the server fixtures {sorted(named)}: "
                                "move it to the folder of the servers it needs")


@pytest.fixture(autouse=True)
def _no_server(monkeypatch):
    """A private server started from a unit test is an error, not a slow test."""
    from lockrace.servers.embedded_postgres import EmbeddedPostgres
    from lockrace.servers.private_mysql import PrivateMySQL

    def refuse(self, *args, **kwargs):
        raise AssertionError(f"a unit test started a private {type(self).__name__}: it belongs beside the server tests")

    for cls in (EmbeddedPostgres, PrivateMySQL):
        monkeypatch.setattr(cls, "start", refuse)
