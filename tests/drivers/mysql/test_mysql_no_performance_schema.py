"""MySQL with performance_schema=OFF (a setting some hosted servers have): its lock
views are empty, so lockrace sees that a statement waits for a row lock (INNODB_TRX)
and says in a sentence that the server does not tell on whom; metadata-lock waits
still show in the process list.  On a private MySQL of this module's own."""

from __future__ import annotations

import pytest

from lockrace.backends import open_backend
from lockrace.backends.mysql import NO_PERFORMANCE_SCHEMA
from lockrace.engine.race import Race
from lockrace.servers.private_mysql import PrivateMySQL
from lockrace.servers.target import Target

pytestmark = pytest.mark.mysql_only


class _NoPerformanceSchema(PrivateMySQL):
    def _argv(self, workdir):
        return [a for a in super()._argv(workdir) if a != "--performance-schema=ON"] + ["--performance-schema=OFF"]


@pytest.fixture(scope="module")
def server():
    server = _NoPerformanceSchema()
    server.start()
    try:
        yield Target("mysql", "private", mysql_kwargs=server.connect_kwargs(), server=server)
    finally:
        server.stop()


async def test_row_and_metadata_waits_without_performance_schema(server):
    backend = await open_backend(server)
    assert backend.flavor == "mysql8" and backend.performance_schema is False
    await backend.reset_sandbox()
    await backend.run_admin(["CREATE TABLE t (id int PRIMARY KEY, v int) ENGINE=InnoDB", "INSERT INTO t VALUES (1, 0)"])
    race = await Race(backend, ["A", "B", "C"]).open()
    try:
        await race.run("A", "BEGIN")
        await race.run("A", "UPDATE t SET v = 1 WHERE id = 1")
        await race.run("B", "SET SESSION innodb_lock_wait_timeout = 1")
        res = await race.run("B", "UPDATE t SET v = 2 WHERE id = 1")
        assert res.outcome == "timed_out" and res.code == "1205"
        # seen waiting, on a row of t; on whom the server does not say, and lockrace says so
        assert res.blockers_seen == (NO_PERFORMANCE_SCHEMA,), res.blockers_seen
        assert res.lock is not None and res.lock.kind == "record" and res.lock.relation == "t", res.lock
        # a metadata-lock wait: the process list says it, A's open transaction is what holds t
        await race.run("C", "SET SESSION lock_wait_timeout = 1")
        res = await race.run("C", "ALTER TABLE t ADD COLUMN w int")
        assert res.outcome == "timed_out" and res.lock is not None and res.lock.kind == "metadata", res
        assert res.blockers_seen == ("A",), res.blockers_seen
        await race.run("A", "COMMIT")
        assert (await race.run("B", "UPDATE t SET v = 2 WHERE id = 1")).outcome == "ok"
    finally:
        await race.close()
