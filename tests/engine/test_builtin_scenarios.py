"""Every built-in scenario verified on every engine it declares, on real servers."""

from __future__ import annotations

import pytest

from lockrace.engine.runner import ScenarioRunner
from lockrace.runtime.races import new_race
from lockrace.scenario.library import builtin_paths, load

CASES = [(p, e) for p in builtin_paths() for e in load(p).engines]


def test_library_is_not_empty():
    names = {p.stem for p in builtin_paths()}
    assert {"pg-nowait", "pg-lock-timeout", "pg-skip-locked",
            "mysql-nowait", "mysql-lock-wait-timeout", "mysql-skip-locked"} <= names


@pytest.mark.parametrize("path,engine", CASES, ids=[f"{p.stem}-{e}" for p, e in CASES])
async def test_builtin_scenario_verifies(path, engine, backend):
    scenario = load(path)
    race, _ = new_race(backend, scenario)  # a cluster: sessions sit on the scenario's nodes
    await race.open()
    try:
        runner = ScenarioRunner(race, scenario, step_timeout=15)
        report = await runner.run()
        await runner.teardown()
    finally:
        await race.close()
    assert report.failures == []
    assert len(report.records) == len(scenario.steps)
