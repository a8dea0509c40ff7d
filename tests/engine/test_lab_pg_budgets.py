"""Budgets read back from PostgreSQL with current_setting() (changed for the
overhead bench: the pg_settings view cost ~1.3 ms after every SET / error)."""

from __future__ import annotations

import pytest

from lockrace.backends.postgres import _guc_ms


@pytest.mark.parametrize("text, ms", [("0", 0.0), ("100ms", 100.0), ("2s", 2000.0), ("1min", 60_000.0),
                                      ("1h", 3_600_000.0), ("1d", 86_400_000.0), ("250", 250.0), ("", 0.0)])
def test_guc_text_to_ms(text, ms):
    assert _guc_ms(text) == ms


@pytest.mark.parametrize("value, ms", [("1500ms", 1500.0), ("90s", 90_000.0), ("3600000", 3_600_000.0), ("0", 0.0)])
async def test_budgets_read_back_from_the_server(pg_backend, value, ms):
    session = await pg_backend.connect_session("T")
    try:
        await session.execute(f"SET lock_timeout = '{value}'")
        await session.execute("SET statement_timeout = '2min'")
        got = {b.name: b.ms for b in await session.budgets()}
        assert got["lock_timeout"] == ms
        assert got["statement_timeout"] == 120_000.0
        assert got["deadlock_timeout"] > 0  # server default 1s
        assert set(got) == {"lock_timeout", "statement_timeout", "deadlock_timeout", "idle_in_transaction_session_timeout"}
    finally:
        await session.close()
