"""Every built-in scenario through lockrace (as ``lockrace run`` runs it) and through
raw driver connections, compared statement by statement and by the tables' final
contents (see witness_harness.py)."""

from __future__ import annotations

import pytest

from lockrace.registry import SINGLE_ENGINES
from lockrace.scenario.library import builtin_paths, load
from witness_harness import compare_scenario

ENGINES = SINGLE_ENGINES  # single servers; the cluster scenarios have their own engines
CASES = [(p, e) for p in builtin_paths() for e in load(p).engines if e in ENGINES]

# What legitimately differs run to run, by scenario and step number, with the reason.
IGNORE: dict[tuple[str, str], dict[int, dict[str, str]]] = {}
# Which session is the deadlock victim depends on whether the second UPDATE reaches the
# server within deadlock_timeout (200 / 500 ms) of the first one's wait: on a loaded
# machine either side of the comparison can miss that.  Compared up to three times;
# they must agree once (a difference lockrace makes would not come and go).
TIMED = {("pg-deadlock", "postgres"), ("pg-mysql-deadlock-one-victim", "postgres")}


def test_every_single_server_scenario_is_compared():
    assert {p.stem for p, _ in CASES} >= {"pg-skip-locked", "mysql-skip-locked", "pg-deadlock"}


@pytest.mark.parametrize("path,engine", CASES, ids=[f"{p.stem}-{e}" for p, e in CASES])
async def test_witness_builtin_scenario(path, engine, backend):
    scenario = load(path)
    ignore = IGNORE.get((path.stem, engine), {})
    seen = []
    for _ in range(3 if (path.stem, engine) in TIMED else 1):
        found = await compare_scenario(backend, scenario, ignore)
        if not found:
            return
        seen.append(found)
    assert seen == []
