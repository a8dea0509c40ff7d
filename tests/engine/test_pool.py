"""The one server pool (lockrace run, bench, specs and the app): starts a private
server on first use, starts it again if it died, stops it on close; an unusable
DSN is one clear sentence that never shows the password."""

from __future__ import annotations

import asyncio

import pytest

from lockrace.engine.race import Race
from lockrace.runtime.pool import ServerPool, ServerUnavailable


async def test_pool_starts_restarts_and_stops_its_own_server():
    pool = ServerPool({"postgres": None})
    try:
        backend = await pool.backend("postgres")
        target = pool.targets["postgres"]
        assert target.owned and pool.origin("postgres") and target.server.running
        assert await pool.backend("postgres") is backend  # one server per engine
        await asyncio.to_thread(target.server.kill)
        assert not target.server.running
        assert await pool.backend("postgres") is backend  # started again on its data
        assert target.server.running
        race = await Race(backend, ("A",)).open()
        try:
            assert (await race.run("A", "SELECT 1")).outcome == "ok"
        finally:
            await race.close()
    finally:
        await pool.close()
    assert not pool.targets["postgres"].server.running


async def test_pool_leaves_servers_it_was_given_running(pg_server):
    pool = ServerPool(targets={"postgres": pg_server})
    await pool.backend("postgres")
    await pool.close()
    assert pg_server.server is None or pg_server.server.running


async def test_unusable_dsn_is_one_sentence_without_the_password():
    pool = ServerPool({"postgres": "postgresql://someone:s3cret@127.0.0.1:1/nowhere"})
    with pytest.raises(ServerUnavailable) as caught:
        await pool.backend("postgres")
    await pool.close()
    text = str(caught.value)
    assert "s3cret" not in text and "\n" not in text.strip() and text.strip()
