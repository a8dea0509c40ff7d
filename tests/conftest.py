"""The whole suite's hooks; the server fixtures live in tests/support/servers.py.

Each folder's conftest.py marks its tests with its marker (unit, engine,
postgres, mysql, galera, standby, app, cli, isolation, witness).

Every test of the MySQL family carries the ``mysql`` marker (given here: a
test that uses the MySQL-family fixtures or parameters, or whose code names
MySQL or MariaDB), so that ``LOCKRACE_MYSQLD=... pytest -m mysql`` runs all of
them again on another server.  A test of what only MariaDB has (WAIT n,
METADATA_LOCK_INFO, XA across connections, ...) is marked ``mariadb_only``
and is left out (deselected, never skipped) when the private server is MySQL;
one of what only MySQL has (performance_schema switched off) is ``mysql_only``
and runs in the MySQL pass.
"""

from __future__ import annotations

import atexit
import inspect
import os
import re
import shutil
import tempfile

import pytest
from support.flavor import private_mysql_flavor

# the server fixtures (pg_backend, mysql_backend, make_race, own_server, ...), the DSN
# fixtures of servers lockrace did not start (pg_dsn, mysql_dsn) and server_tmp
pytest_plugins = ("support.servers", "support.dsn", "support.cli")

# the app keeps its statement history across runs: the tests' own, not the user's,
# removed when the run ends (a directory given from outside is left alone)
if "LOCKRACE_HISTORY_DIR" not in os.environ:
    _HISTORY = tempfile.mkdtemp(prefix="lockrace-test-history-")
    os.environ["LOCKRACE_HISTORY_DIR"] = _HISTORY
    atexit.register(shutil.rmtree, _HISTORY, ignore_errors=True)

_MYSQL_FIXTURES = {"mysql_server", "mysql_backend"}
_NAMES_MYSQL = re.compile(r"mysql|mariadb", re.IGNORECASE)


def _mysql_family(item) -> bool:
    params = getattr(getattr(item, "callspec", None), "params", {})
    chosen = [v for k, v in params.items() if k in ("engine", "own_server_module")]
    if chosen:
        return "mysql" in chosen
    if item.get_closest_marker("mysql") or _MYSQL_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    if "galera" in item.nodeid:
        return False  # Galera is MariaDB's own: its tests are not run again on MySQL
    try:
        code = inspect.getsource(item.function)
    except (OSError, TypeError, AttributeError):
        return False
    return bool(_NAMES_MYSQL.search(code))


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _mysql_family(item) and not item.get_closest_marker("mysql"):
            item.add_marker(pytest.mark.mysql)
    # what only one flavor has is left out on the other (deselected: never a skip)
    absent = "mariadb_only" if private_mysql_flavor() == "mysql" else "mysql_only"
    kept, left = [], []
    for item in items:
        (left if item.get_closest_marker(absent) else kept).append(item)
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = kept


