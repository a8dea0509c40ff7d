"""Verdicts checked against what the real server did (PostgreSQL and MariaDB)."""

from pathlib import Path

from lockrace.engine.race import Race
from lockrace.engine.runner import ScenarioRunner
from lockrace.scenario.text_format import read_scenario

DATA = Path(__file__).parent / "data" / "verdicts"


async def _run(backend, name: str, step_timeout: float = 5):
    scenario = read_scenario(DATA / name)
    race = await Race(backend, scenario.session_names()).open()
    try:
        return await ScenarioRunner(race, scenario, step_timeout=step_timeout).run()
    finally:
        await race.close()


async def test_blocked_by_is_the_union_over_the_step(engine, pg_backend, mysql_backend):
    # D waits for B and C (both share-lock the row; PostgreSQL names one member
    # of the MultiXact at a time, B then C); B commits first, so the server's
    # last report names only C.  blocked-by: B, C must still hold.
    backend = pg_backend if engine == "postgres" else mysql_backend
    report = await _run(backend, "blocked-by-union.race")
    assert report.failures == []
    d = report.records[4]
    assert d.result.blocked_by == ("C",)  # the last report: only C
    assert set(d.result.blockers_seen) == {"B", "C"}
