"""Deadlocks explained and the words a learner reads, on the real private servers:
a 3-session cycle on PostgreSQL and MariaDB carries the server's own account of it
with sessions by name and a ``cycle:`` line, in the result, the transcript, the JSON
report and the panel's text; a COMMIT that rolled back and NOWAIT behind a table lock
say so."""

from __future__ import annotations

import asyncio

from lockrace.app.session_log import SessionLog
from lockrace.core.deadlock import explain_innodb, explain_postgres, latest_deadlock
from lockrace.core.events import LockInfo, StatementExplained
from lockrace.core.lockwords import wait_words
from lockrace.engine.explain import COMMIT_ROLLED_BACK
from lockrace.render.transcript import explained_lines

SETUP = "CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL)"


async def _three_way(engine, backend, make_race):
    race = await make_race(backend, ("A", "B", "C"))
    await backend.run_admin([SETUP + (" ENGINE=InnoDB" if engine == "mysql" else ""),
                             "INSERT INTO accounts VALUES (1, 100), (2, 100), (3, 100)"])
    if engine == "postgres":
        for name in "ABC":  # every session may be the one whose check finds the cycle: make it A
            await race.run(name, f"SET deadlock_timeout = '{'200ms' if name == 'A' else '10s'}';")
    for name, row in zip("ABC", (1, 2, 3)):
        assert (await race.run(name, "BEGIN;")).outcome == "ok"
        assert (await race.run(name, f"UPDATE accounts SET balance = 0 WHERE id = {row};")).outcome == "ok"
    explained = []
    race.subscribe(lambda e: explained.append(e) if isinstance(e, StatementExplained) else None)
    logs = {n: SessionLog(n, backend.flavor) for n in "ABC"}
    race.subscribe(lambda e: logs[e.session].apply(e) if e.session in logs else None)
    # MariaDB ends the cycle at once in the session that closes it; PostgreSQL in A, after
    # its deadlock_timeout: so on MariaDB C closes it last, on PostgreSQL A waits first
    order = [("A", 2), ("B", 3), ("C", 1)] if engine == "mysql" else [("B", 3), ("C", 1), ("A", 2)]
    running = {}
    for name, row in order:
        running[name] = race.submit(name, f"UPDATE accounts SET balance = 1 WHERE id = {row};")
        if name != order[-1][0]:
            assert await race.wait_blocked_or_done(running[name], 10)
    victim = "C" if engine == "mysql" else "A"
    await asyncio.wait_for(race.settled(victim), 20)
    res = race.sessions[victim].last
    assert res.outcome == "deadlock", (res.code, res.message)
    await race.run(victim, "ROLLBACK;")
    left = [n for n in "ABC" if n != victim]
    for _ in range(40):  # each rollback lets the next waiter of the broken chain through
        for name in [n for n in left if race.sessions[n].running is None]:
            await race.run(name, "ROLLBACK;")
            left.remove(name)
        if not left:
            break
        await asyncio.sleep(0.1)
    assert not left
    return res, explained, logs


async def test_pg_three_session_cycle_explained(pg_backend, make_race):
    res, explained, logs = await _three_way("postgres", pg_backend, make_race)
    assert res.cycle == ("A", "B", "C")
    assert "cycle: A → B → C → A" in res.explained
    # the server's DETAIL, pids replaced by the sessions' names
    assert any(line.startswith("A waits for ShareLock on transaction ") and "; blocked by B." in line
               for line in res.explained), res.explained
    assert any(line.startswith("C waits for ShareLock on transaction ") and "; blocked by A." in line
               for line in res.explained)
    assert not any("Process" in line or "process" in line for line in res.explained)
    assert "A waits for B's transaction to end: B changed a row A wants" in "\n".join(res.explained)
    assert [e.result for e in explained if e.session == "A"] == [res]
    # the victim's panel text carries it, once
    panel = logs["A"].lines
    assert sum(line == "-- cycle: A → B → C → A" for line in panel) == 1, panel
    assert explained_lines(res)[-1] == "-- cycle: A → B → C → A"


async def test_mariadb_three_session_cycle_explained(mysql_backend, make_race):
    res, explained, logs = await _three_way("mysql", mysql_backend, make_race)
    assert res.cycle == ("C", "A", "B"), res.explained
    assert res.explained[-1] == "cycle: C → A → B → C"
    text = "\n".join(res.explained)
    assert "C: UPDATE accounts SET balance = 1 WHERE id = 1 -- waits for row " in text
    assert "held by A" in text and "InnoDB rolled back C's transaction (the victim)" in text
    assert "thread" not in text
    panel = logs["C"].lines
    assert sum(line == "-- cycle: C → A → B → C" for line in panel) == 1, panel


async def test_commit_that_rolled_back_says_nothing_was_committed(pg_backend, make_race):
    race = await make_race(pg_backend, ("A",))
    await pg_backend.run_admin([SETUP, "INSERT INTO accounts VALUES (1, 100)"])
    log = SessionLog("A", "postgres")
    race.subscribe(lambda e: log.apply(e) if e.session == "A" else None)
    await race.run("A", "BEGIN;")
    await race.run("A", "UPDATE accounts SET balance = 0 WHERE id = 1;")
    assert (await race.run("A", "SELECT 1/0;")).outcome == "error"
    res = await race.run("A", "COMMIT;")
    await race.settled("A")
    assert res.tag == "ROLLBACK" and res.explained == (COMMIT_ROLLED_BACK,)
    assert f"-- {COMMIT_ROLLED_BACK}" in log.lines
    plain = await race.run("A", "ROLLBACK;")  # a ROLLBACK asked for says nothing more
    assert plain.explained == ()


async def test_nowait_behind_a_table_lock_says_nowait_covers_rows_only(pg_backend, make_race):
    race = await make_race(pg_backend, ("A", "B"))
    await pg_backend.run_admin([SETUP, "INSERT INTO accounts VALUES (1, 100)"])
    await race.run("A", "BEGIN;")
    await race.run("A", "LOCK TABLE accounts IN ACCESS EXCLUSIVE MODE;")
    stmt = race.submit("B", "SELECT id FROM accounts WHERE id = 1 FOR UPDATE NOWAIT;")
    assert await race.wait_blocked_or_done(stmt, 10)
    await race.run("A", "COMMIT;")
    await race.settled("B")
    res = race.sessions["B"].last
    assert res.outcome == "ok"
    assert any(line.startswith("NOWAIT covers only row locks") and "(table accounts RowShareLock)" in line
               for line in res.explained), res.explained


async def test_row_queue_words(pg_backend, make_race):
    race = await make_race(pg_backend, ("A", "B", "C"))
    await pg_backend.run_admin([SETUP, "INSERT INTO accounts VALUES (1, 100)"])
    await race.run("A", "BEGIN;")
    await race.run("A", "UPDATE accounts SET balance = 0 WHERE id = 1;")
    b = race.submit("B", "UPDATE accounts SET balance = 1 WHERE id = 1;")
    assert await race.wait_blocked_or_done(b, 10)
    c = race.submit("C", "UPDATE accounts SET balance = 2 WHERE id = 1;")
    assert await race.wait_blocked_or_done(c, 10)
    # B waits for A's transaction (PostgreSQL shows it as a ShareLock on A's transaction id)
    assert wait_words(b.lock, list(b.blockers)) == "waits for A's transaction to end (A changed or locked this row)"
    # C waits for its place in the row's line (the tuple lock B holds), not for a table lock
    assert b.blockers == ("A",) and c.blockers == ("B",)
    assert "place in line" in wait_words(c.lock, list(c.blockers)) and "not a table lock" in wait_words(c.lock, ["B"])
    await race.run("A", "ROLLBACK;")
    await race.settled("B")
    await race.run("B", "ROLLBACK;")
    await race.settled("C")


def test_parsers_on_the_servers_own_text():
    detail = ("Process 10 waits for ShareLock on transaction 755; blocked by process 11.\n"
              "Process 11 waits for ExclusiveLock on tuple (0,1) of relation 16384 of database 5; blocked by process 99.\n"
              "Process 99 waits for ShareLock on transaction 754; blocked by process 10.")
    names = {10: "A", 11: "B"}
    e = explain_postgres(detail, lambda i: names.get(i, f"pid {i}"), "A")
    assert e.cycle == ["A", "B", "pid 99"] and e.cycle_line() == "cycle: A → B → pid 99 → A"
    assert e.lines[1] == "B waits for ExclusiveLock on tuple (0,1) of relation 16384 of database 5; blocked by pid 99."
    assert explain_postgres("", names.get, "A").cycle == []
    status = "\n".join([
        "------------------------", "LATEST DETECTED DEADLOCK", "------------------------",
        "2026-01-01 00:00:00 0x1", "*** (1) TRANSACTION:", "TRANSACTION 23, ACTIVE 1 sec starting index read",
        "MariaDB thread id 5, OS thread handle 1, query id 17 localhost root Updating", "UPDATE a SET b=1 WHERE id=2",
        "*** WAITING FOR THIS LOCK TO BE GRANTED:",
        "RECORD LOCKS space id 5 page no 3 n bits 320 index PRIMARY of table `d`.`a` trx id 23 lock_mode X locks rec but not gap waiting",
        "Record lock, heap no 3 PHYSICAL RECORD: n_fields 4; compact format; info bits 0",
        " 0: len 4; hex 80000002; asc     ;;", "", "*** CONFLICTING WITH:",
        "RECORD LOCKS space id 5 page no 3 n bits 320 index PRIMARY of table `d`.`a` trx id 24 lock_mode X locks rec but not gap",
        "", "*** (2) TRANSACTION:", "TRANSACTION 24, ACTIVE 1 sec starting index read",
        "MariaDB thread id 6, OS thread handle 1, query id 18 localhost root Updating", "UPDATE a SET b=1 WHERE id=1",
        "*** WAITING FOR THIS LOCK TO BE GRANTED:",
        "RECORD LOCKS space id 5 page no 3 n bits 320 index PRIMARY of table `d`.`a` trx id 24 lock_mode X locks rec but not gap waiting",
        " 0: len 4; hex 80000001; asc     ;;", "", "*** CONFLICTING WITH:",
        "RECORD LOCKS space id 5 page no 3 n bits 320 index PRIMARY of table `d`.`a` trx id 23 lock_mode X locks rec but not gap",
        "", "*** WE ROLL BACK TRANSACTION (2)", "------------", "TRANSACTIONS", "------------", "Trx id counter 30"])
    section = latest_deadlock(status)
    assert section.startswith("2026-01-01") and "Trx id counter" not in section
    e = explain_innodb(section, {5: "A", 6: "B"}.get, 6)
    assert e.cycle == ["B", "A"]
    assert e.lines[0] == "A: UPDATE a SET b=1 WHERE id=2 -- waits for row d.a PRIMARY key 2 (exclusive, the row only), held by B"
    assert explain_innodb(section, {5: "A", 6: "B"}.get, 5) is None  # not about this victim
    assert wait_words(LockInfo("relation", "AccessExclusiveLock", "accounts"), ["A"]) == ""


def test_json_report_carries_the_cycle(pg_server):
    """``lockrace run --format json``: the victim's step has the server's lines and the cycle."""
    import json
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-m", "lockrace", "run", "pg-deadlock", "--format", "json",
                          "--pg", pg_server.conninfo], capture_output=True, text=True, timeout=120)
    # a DSN server: lockrace works in a sandbox schema of its own there
    assert res.returncode == 0, res.stderr
    report, = json.loads(res.stdout)
    victim = next(s for s in report["steps"] if s["outcome"] == "deadlock")
    assert victim["cycle"] == ["A", "B"]
    assert victim["explained"][-1] == "cycle: A → B → A"
    assert victim["explained"][0].startswith("A waits for ShareLock on transaction ")
    others = [s for s in report["steps"] if s["outcome"] != "deadlock"]
    assert all(s["cycle"] is None for s in others)
