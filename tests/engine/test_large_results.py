"""Large results: the backends keep the first ROW_LIMIT rows of a result set and
only count the rest, streaming it off the socket, so memory stays bounded; a
cancel stops the fetch; transcripts and expectations use the true count."""

from __future__ import annotations

import asyncio
import time

from lockrace.core.events import ROW_LIMIT
from lockrace.engine.race import Race
from lockrace.engine.runner import ScenarioRunner
from lockrace.render.tables import result_lines
from lockrace.render.transcript import entry_lines
from lockrace.scenario.text_format import parse_scenario
from support.series import series_sql


def _rss_mib() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * 4096 / 2**20


def _series(backend, n: int) -> str:
    return series_sql(backend.flavor, n)


async def _race(backend):
    return await Race(backend, ["A", "B"]).open()


async def test_two_million_rows_keep_200_and_count_the_rest(engine, pg_backend, mysql_backend):
    backend = pg_backend if engine == "postgres" else mysql_backend
    race = await _race(backend)
    try:
        before = _rss_mib()
        result = await race.run("A", _series(backend, 2_000_000))
        grown = _rss_mib() - before
    finally:
        await race.close()
    assert result.outcome == "ok", result.message
    assert len(result.rows) == ROW_LIMIT == 200
    assert result.total_rows == 2_000_000 and result.truncated
    assert result.rows[0] == ("1",) and result.rows[-1] == ("200",)
    # holding 2,000,000 rows as Python tuples of str takes several hundred MiB
    assert grown < 100, f"RSS grew by {grown:.0f} MiB"
    lines = result_lines(result, backend.flavor)
    assert lines[-1] == "(first 200 of 2,000,000 rows)"
    assert len(lines) == 2 + 200 + 1


async def test_every_result_set_of_a_multi_statement_text_is_bounded(engine, pg_backend, mysql_backend):
    backend = pg_backend if engine == "postgres" else mysql_backend
    race = await _race(backend)
    try:
        result = await race.run("A", f"{_series(backend, 300)}; SELECT 7 AS x; {_series(backend, 5)}")
    finally:
        await race.close()
    assert result.outcome == "ok", result.message
    sets = result.result_sets
    assert [(len(s.rows), s.total_rows) for s in sets] == [(200, 300), (1, 1), (5, 5)]
    assert sets[1].rows == [("7",)]
    lines = result_lines(result, backend.flavor)
    assert "(first 200 of 300 rows)" in lines and lines[-1] == "(5 rows)"


async def test_cancel_stops_a_large_fetch(engine, pg_backend, mysql_backend):
    backend = pg_backend if engine == "postgres" else mysql_backend
    race = await _race(backend)
    try:
        stmt = race.submit("A", _series(backend, 500_000_000))
        await asyncio.sleep(0.8)
        assert not stmt.done.is_set(), "the fetch should still be running"
        t0 = time.perf_counter()
        assert await race.cancel("A")
        await asyncio.wait_for(stmt.done.wait(), 5)
        took = time.perf_counter() - t0
        result = stmt.result
        after = await race.run("A", "SELECT 1 AS one")  # the session is usable again
    finally:
        await race.close()
    assert result.outcome == "cancelled", (result.outcome, result.code, result.message)
    assert took < 2, f"cancel took {took:.2f} s"
    assert after.outcome == "ok" and after.rows == [("1",)]


async def test_run_transcript_shows_bounded_rows_and_the_true_count(engine, pg_backend, mysql_backend):
    backend = pg_backend if engine == "postgres" else mysql_backend
    scenario = parse_scenario(
        "title: big read\n"
        f"engines: {engine}\n\n"
        f"A> {_series(backend, 5000)};\n"
        "    rows: 5000\n"
        "    row: 1\n"
    )
    text: list[str] = []
    race = await Race(backend, scenario.session_names()).open()
    try:
        runner = ScenarioRunner(race, scenario, step_timeout=30,
                                on_entry=lambda entry: text.extend(entry_lines(entry, backend.flavor)))
        report = await runner.run()
    finally:
        await race.close()
    assert report.passed, report.failures
    assert "(first 200 of 5,000 rows)" in text
    assert len(text) < 220


async def test_skip_locked_on_a_large_table_still_counts_what_it_passed_over(engine, pg_backend, mysql_backend):
    # the probe that counts skipped rows reads a bounded number of rows, not the whole table
    backend = pg_backend if engine == "postgres" else mysql_backend
    fill = f"INSERT INTO big {_series(backend, 300_000)}"
    await backend.run_admin(["DROP TABLE IF EXISTS big", "CREATE TABLE big (id int PRIMARY KEY)", fill])
    race = await _race(backend)
    try:
        await race.run("A", "BEGIN")
        await race.run("A", "SELECT id FROM big WHERE id = 1 FOR UPDATE")
        got = await race.run("B", "SELECT id FROM big ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED")
        await race.run("A", "ROLLBACK")
    finally:
        await race.close()
        await backend.run_admin(["DROP TABLE IF EXISTS big"])
    assert got.outcome == "skipped" and got.rows == [("2",)]
    assert got.skipped_rows == 1 and got.skipped_from == ("A",)
