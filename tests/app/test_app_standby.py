"""The app on a PostgreSQL primary + hot standby (``lockrace --engine
postgres-standby``): panels name their node, a standby reader is shown
blocked by the startup process, a recovery conflict gets its own badge."""

from __future__ import annotations

import asyncio

import psycopg
import pytest
from support.app import badge, enter, finished, running_app, until

from lockrace.servers.pg_standby import start_standby

# also a standby test: pytest -m standby selects it with tests/drivers/standby
pytestmark = pytest.mark.standby


async def test_app_on_primary_and_standby(pg_standby_pair):
    cluster = await asyncio.to_thread(start_standby, pg_standby_pair)
    async with running_app(engine="postgres-standby", targets={"postgres-standby": cluster}) as (app, pilot):
        assert [str(app.panels[s].border_title).split(" · pid ")[0] for s in "ABCD"] == [
            "Session A @ primary", "Session B @ primary", "Session C @ standby", "Session D @ standby"]
        await enter(pilot, app, "A", "CREATE TABLE t (id int)")
        await finished(pilot, app, "A", 1)
        await enter(pilot, app, "A", "BEGIN")
        await finished(pilot, app, "A", 2)
        await enter(pilot, app, "A", "LOCK TABLE t")
        await finished(pilot, app, "A", 3)
        await enter(pilot, app, "C", "SELECT * FROM t")
        await until(pilot, lambda: badge(app, "C").startswith("BLOCKED"), 5, "C blocked")
        assert badge(app, "C") == "BLOCKED by the startup process (replay) on table t AccessShareLock"
        assert "waits until the startup process (replay) ends" in app.panels["C"].status.wait_line()
        await enter(pilot, app, "A", "COMMIT")
        await finished(pilot, app, "C", 1)
        assert app.panels["C"].status.last.outcome == "ok"

        # D's open transaction holds up replay of a TRUNCATE: after 1 s the standby ends it
        await enter(pilot, app, "D", "BEGIN")
        await finished(pilot, app, "D", 1)
        await enter(pilot, app, "D", "SELECT count(*) FROM t")
        await finished(pilot, app, "D", 2)
        await enter(pilot, app, "A", "TRUNCATE t")
        await finished(pilot, app, "A", 5)
        pid = app.panels["D"].status.ident
        with psycopg.connect(cluster.nodes["standby"].conninfo, autocommit=True) as monitor:
            await until(pilot, lambda: not monitor.execute(
                "SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone(), 10, "the standby to end D")
        await enter(pilot, app, "D", "SELECT 1")
        await finished(pilot, app, "D", 3)
        assert app.panels["D"].status.last.outcome == "recovery_conflict"
        assert badge(app, "D") == "recovery conflict (1 s max_standby_streaming_delay)"
