"""Runner semantics that a scenario author relies on, on a real server."""


from lockrace.engine.race import Race
from lockrace.engine.runner import ScenarioRunner
from lockrace.scenario.text_format import read_scenario
from support.paths import DATA



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


async def test_one_scheduler_steps_a_spec_by_isolationtesters_rule(pg_backend):
    """The scheduler the app steps with, under isolationtester's rule: a step the server
    reports waiting lets the next one go; it completes once its blocker commits; a
    ``(*)`` step moves on at once; the order of completion is the server's."""
    from lockrace.engine.scheduler import Scheduler, Wait, wait_policy
    from lockrace.scenario.spec_format import parse_spec

    spec = parse_spec('''
setup { CREATE TABLE sched_t (id int PRIMARY KEY, v int); INSERT INTO sched_t VALUES (1, 0); }
teardown { DROP TABLE sched_t; }
session s1
step s1u { BEGIN; UPDATE sched_t SET v = 1 WHERE id = 1; }
step s1c { COMMIT; }
session s2
step s2u { UPDATE sched_t SET v = 2 WHERE id = 1; }
step s2r { SELECT v FROM sched_t WHERE id = 1; }
permutation s1u s2u s1c s2r
permutation s1u s2u(*) s1c s2r
''', name="sched")
    first, marked = spec.order()
    assert [wait_policy(spec.step(e.step), "postgres", spec_rules=True, entry=e) for e in marked] == [
        Wait.DONE_OR_WAITING, Wait.MOVE_ON, Wait.DONE_OR_WAITING, Wait.DONE_OR_WAITING]
    race = await Race(pg_backend, spec.session_names()).open()
    try:
        scheduler = Scheduler(race, spec, step_timeout=5)
        assert scheduler.spec_rules
        scheduler.attach()
        await scheduler.prepare()
        for index, entry in enumerate(first, start=1):
            await scheduler.step(spec.step(entry.step), index, entry)
            if entry.step == "s2u":  # the server said it waits: the scheduler moved on
                assert scheduler.report.records[-1].result is None and "s2u" in scheduler.pending
        await scheduler.finish()
        scheduler.detach()
        await scheduler.teardown()
    finally:
        await race.close()
    records = {r.step.name: r for r in scheduler.report.records}
    assert records["s2u"].was_blocked and records["s2u"].blockers == ("s1",)
    assert records["s2u"].result.outcome == "ok" and records["s2u"].launched_before_finish == 3
    assert [tuple(map(str, row)) for row in records["s2r"].result.rows] == [("2",)]
