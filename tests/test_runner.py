"""Runner semantics that a scenario author relies on, on a real server."""

from pathlib import Path

from lockrace.engine.race import Race
from lockrace.engine.runner import ScenarioRunner
from lockrace.scenario.text_format import read_scenario

DATA = Path(__file__).parent / "data"


async def test_completes_after_is_judged_when_the_server_answered(pg_backend):
    # B times out (50 ms) while step 5 (pg_sleep) runs: it finished after step 5,
    # not after step 6, even though the runner only collects it after step 6.
    scenario = read_scenario(DATA / "completes-too-early.race")
    race = await Race(pg_backend, scenario.session_names()).open()
    try:
        report = await ScenarioRunner(race, scenario, step_timeout=5).run()
    finally:
        await race.close()
    assert report.failures == [
        "step 4 (B> UPDATE t SET id = 1 WHERE id = 1;): expected completes-after: 6, got finished after step 5"
    ]
