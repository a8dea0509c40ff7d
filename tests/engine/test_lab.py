"""The race lab (issue 5) and the overhead bench (issue 2, item 10) on real
servers: short runs, checking what must be true of any server, never absolute
times (NOWAIT and bounded waits error on every run, the default wait never
does, and nowait < bounded < default)."""

from __future__ import annotations


import pytest

from lockrace.lab.cli import cmd_bench
from lockrace.runtime.options import BenchOptions
from lockrace.lab.holder_waiter import HolderWaiterLab
from lockrace.lab.modes import LabError, make_config
from lockrace.lab.overhead import OverheadBench
from lockrace.lab.table import lab_json, lab_table, overhead_json


def _medians(result):
    return {k: mr.summary.median_ms for k, mr in result.modes.items()}


def _check_shape(result, runs):
    for key, mr in result.modes.items():
        s = mr.summary
        assert s.runs == runs, key
        assert mr.problems == [], key
    assert result.modes["nowait"].summary.errors == runs
    assert result.modes["timeout"].summary.errors == runs
    assert result.modes["default"].summary.errors == 0
    assert all(s.row == "1" for s in result.modes["default"].samples)
    m = _medians(result)
    assert m["nowait"] < m["timeout"] < m["default"]


async def test_pg_short_bench(pg_backend):
    await pg_backend.reset_sandbox()  # other tests may have dropped it (as make_race does)
    cfg = make_config("postgres", pg_backend.flavor, runs=3, hold_ms=250, budget_ms=60, modes=None, warmup=1)
    seen = []
    result = await HolderWaiterLab(pg_backend, cfg, lambda mode, sample, done, total: seen.append((done, total))).run()
    assert list(result.modes) == ["default", "timeout", "nowait", "skip_locked"]
    _check_shape(result, 3)
    skip = result.modes["skip_locked"]
    assert skip.summary.errors == 0 and all(s.row == "2" for s in skip.samples)
    # the budget the engine read back from the server after SET LOCAL
    assert result.modes["timeout"].applied_budget_ms == 60
    assert seen[-1] == (16, 16)  # 4 modes x (1 warm-up + 3 runs), reported as they finish
    doc = lab_json(result)
    assert doc["engine"] == "postgres" and doc["server_version"] == pg_backend.version
    assert set(doc["modes"]["nowait"]) >= {"median_ms", "min_ms", "max_ms", "errors", "runs"}
    assert doc["modes"]["nowait"]["errors"] == 3 and doc["hold_ms"] == 250 and doc["budget_ms"] == 60
    assert lab_table(result).row_count == 4


async def test_mysql_short_bench(mysql_backend):
    await mysql_backend.reset_sandbox()
    cfg = make_config("mysql", mysql_backend.flavor, runs=2, hold_ms=1100, budget_ms=1000,
                      modes="default,timeout,nowait,skip_locked", warmup=1)
    result = await HolderWaiterLab(mysql_backend, cfg).run()
    _check_shape(result, 2)
    assert result.modes["timeout"].applied_budget_ms == 1000  # @@innodb_lock_wait_timeout read back
    assert all(s.row == "2" for s in result.modes["skip_locked"].samples)


@pytest.mark.mariadb_only  # WAIT n is MariaDB syntax
async def test_mariadb_wait_fraction_behaves_as_wait_0(mysql_backend):
    """MariaDB keeps only the whole seconds of WAIT n: WAIT 0.1 refuses at once."""
    await mysql_backend.reset_sandbox()
    cfg = make_config("mysql", "mariadb", runs=3, hold_ms=400, budget_ms=100, modes="wait,nowait", warmup=1)
    result = await HolderWaiterLab(mysql_backend, cfg).run()
    wait = result.modes["wait"]
    assert wait.mode.sql.endswith("WAIT 0.1")
    assert wait.summary.errors == 3
    # a 100 ms budget would keep each run waiting >= 100 ms; the server applied none
    assert wait.summary.max_ms < 50
    assert wait.applied_budget_ms == 0
    assert "applied 0 s" in wait.budget_note


async def test_overhead_bench_pg(pg_backend, pg_server):
    await pg_backend.reset_sandbox()
    result = await OverheadBench(pg_backend, pg_server, runs=3, warmup=1).run()
    nowait, bounded = result.cases["nowait"], result.cases["bounded"]
    for cr in (nowait, bounded):
        for way in ("raw", "raw_async", "engine", "engine_wall"):
            assert cr.summary(way).errors == 3 and cr.summary(way).runs == 3
    # a lock_timeout wait lasts at least its budget, through either path
    assert bounded.summary("raw").min_ms >= 100 and bounded.summary("engine").min_ms >= 100
    assert nowait.summary("engine").median_ms < bounded.summary("engine").median_ms
    doc = overhead_json(result)
    # the target is on what the caller waits: the bare driver's median + 0.1 ms
    assert doc["cases"]["bounded"]["target_ms"] == round(bounded.summary("raw").median_ms + 0.1, 3)
    assert doc["cases"]["nowait"]["caller_overhead_ms"] == round(
        nowait.summary("engine_wall").median_ms - nowait.summary("raw").median_ms, 3)


@pytest.mark.parametrize(
    "engine, flavor, hold, budget, modes, words",
    [
        ("postgres", "postgres", 120, 100, None, "must outlast"),
        ("postgres", "postgres", 500, 0, None, "positive"),
        ("mysql", "mariadb", 1500, 500, None, "whole seconds"),
        ("postgres", "postgres", 500, 100, "wait", "only on MariaDB"),
        ("mysql", "mysql8", 1500, 1000, "default,wait", "only on MariaDB"),
        ("postgres", "postgres", 500, 100, "default,sometimes", "unknown mode"),
    ],
)
def test_arguments_that_make_no_sense_are_refused(engine, flavor, hold, budget, modes, words):
    with pytest.raises(LabError, match=words):
        make_config(engine, flavor, 5, hold, budget, modes)


def test_defaults_per_engine():
    pg = make_config("postgres", "postgres", 30, None, None, None)
    my = make_config("mysql", "mariadb", 30, None, None, None)
    assert (pg.hold_ms, pg.budget_ms) == (500, 100)
    assert (my.hold_ms, my.budget_ms) == (1500, 1000)
    assert my.modes == ("default", "timeout", "wait", "nowait", "skip_locked")
    assert [m.label for m in pg.plan][:2] == ["default FOR UPDATE", "lock_timeout=100ms"]
    assert [m.label for m in my.plan][1:3] == ["innodb_lock_wait_timeout=1", "FOR UPDATE WAIT 1"]


def test_cli_refuses_before_starting_a_server(capsys):
    args = BenchOptions(engine="postgres", runs=30, hold_ms=100, budget_ms=100, modes=None, overhead=False, json=False)
    assert cmd_bench(args) == 2
    assert "must outlast the bounded wait" in capsys.readouterr().err
