"""Differences the witness harness found between lockrace and a raw client, each
pinned by a focused test (the harness's cases show them too)."""

from __future__ import annotations

import asyncio

import pymysql
import pytest


def _routines(backend) -> list[tuple]:
    conn = pymysql.connect(**backend.target.mysql_kwargs, autocommit=True)
    try:
        cur = conn.cursor()
        cur.execute("SELECT ROUTINE_TYPE, ROUTINE_NAME FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = %s"
                    " ORDER BY 2", (backend.sandbox,))
        return list(cur.fetchall())
    finally:
        conn.close()


@pytest.mark.parametrize("engine", ["mysql"])
async def test_fresh_sandbox_has_no_stored_routines_left(engine, backend):
    """A scenario whose setup creates a stored function ran once per server: the
    fresh sandbox of the next run still had it (1304 FUNCTION already exists)."""
    setup = ["CREATE FUNCTION claim(i int) RETURNS int DETERMINISTIC RETURN i + 1",
             "CREATE PROCEDURE `odd``name`() SELECT 1"]
    await backend.reset_sandbox()
    await backend.run_admin(setup)
    assert len(await asyncio.to_thread(_routines, backend)) == 2
    await backend.reset_sandbox()
    assert await asyncio.to_thread(_routines, backend) == []
    await backend.run_admin(setup)  # the same setup again, as the next run does
    await backend.reset_sandbox()
