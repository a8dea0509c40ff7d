"""Play scenarios in the real app, headless, to their telling moment and
save SVG screenshots in screenshots/.

    python scripts/screenshots.py            # every picture, at 160x48 and at 80x24
    python scripts/screenshots.py pg-nowait  # only those whose name contains this
    python scripts/screenshots.py --mysqld "$(scripts/get-mysql)" mysql-  # the MySQL ones too

Starts the embedded PostgreSQL 18, a private MariaDB and a private MariaDB
Galera cluster as the pictures need them (or uses LOCKRACE_PG_DSN /
LOCKRACE_MYSQL_DSN / LOCKRACE_GALERA_DSNS) and stops them at the end.  The
pictures of MySQL itself (mysql-*) are made on a private MySQL started from the
server binary given with --mysqld; without it they are left out, with a line
that says so.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lockrace.app.app import LockraceApp  # noqa: E402
from lockrace.engine.lock_graph import lock_graph  # noqa: E402
from lockrace.scenario.library import resolve  # noqa: E402
from lockrace.servers.choose import target_for  # noqa: E402

OUT = ROOT / "screenshots"
SIZES = [(160, 48), (80, 24)]  # the first is the pictures' plain name, the others get a -COLSxROWS suffix
SIZE = SIZES[0]


async def wait_for(pilot, condition, timeout=20.0, what="condition"):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        await pilot.pause(0.02)


async def play_until(app, pilot, done) -> None:
    """Press F5 (step) until ``done(record)`` holds for a completed step."""
    player = app.player
    while not any(done(r) for r in player.records if r.result is not None):
        if player.next_step is None and not player.busy:
            raise RuntimeError(f"{player.scenario.name}: ran out of steps before the telling moment")
        if not player.busy:
            await pilot.press("f5")
        await pilot.pause(0.05)
    await wait_for(pilot, lambda: not player.busy, what="step to settle")


def outcome_in(session: str, outcome: str):
    return lambda r: r.step.session == session and r.result.outcome == outcome


async def scenario_shot(targets, name: str, engine: str, done, filename: str) -> Path:
    app = LockraceApp(engine=engine, scenario=resolve(name), targets=targets)
    async with app.run_test(size=SIZE) as pilot:
        await asyncio.wait_for(app.ready.wait(), 60)
        await play_until(app, pilot, done)
        await pilot.pause(0.3)
        app.screen.set_focus(None)
        await pilot.pause()
        path = Path(app.save_screenshot(filename, str(OUT)))
        await app._close_race()
    return path


async def free_form_shot(targets, engine: str, filename: str) -> Path:
    app = LockraceApp(engine=engine, targets=targets)
    async with app.run_test(size=SIZE) as pilot:
        await asyncio.wait_for(app.ready.wait(), 60)

        async def submit(session: str, sql: str) -> None:
            panel = app.panels[session]
            count = panel.status.statements
            panel.input.focus()
            panel.input.value = sql
            await panel.input.action_submit()
            await pilot.pause(0.1)
            session_state = app.race.sessions[session]
            while panel.status.statements == count and session_state.running is None and panel.input.value == sql:
                await panel.input.action_submit()  # refused while the last one was being wrapped up: again
                await pilot.pause(0.1)

            def settled() -> bool:
                st = panel.status
                return st.statements > count and (st.running is None or st.running.blocked_since is not None)

            await wait_for(pilot, settled, what=f"{session} to finish or block")

        await submit("A", "BEGIN;")
        await submit("A", "UPDATE accounts SET balance = balance - 10 WHERE id = 1;")
        await submit("B", "SET lock_timeout = '5s';" if engine == "postgres"
                     else "SET SESSION innodb_lock_wait_timeout = 5;")
        await submit("B", "UPDATE accounts SET balance = balance + 10 WHERE id = 1;")
        await wait_for(pilot, lambda: app.panels["B"].status.running is not None
                       and app.panels["B"].status.running.blocked_since is not None, what="B blocked")
        await submit("C", "SELECT generate_series(1, 2000000) AS n;" if engine == "postgres"
                     else "SELECT seq AS n FROM seq_1_to_2000000;")
        await submit("D", "UPDATE accounts SET balance = balance + 20 WHERE id = 1;")
        await wait_for(pilot, lambda: not app.panels["C"].drawing, what="C's rows drawn")
        await pilot.pause(2.0)  # let the bar grow toward the budget marker
        app.panels["A"].input.focus()
        app.panels["A"].input.value = "COMMIT;"
        await pilot.pause()
        path = Path(app.save_screenshot(filename, str(OUT)))
        await app._close_race()
    return path


async def lock_view_shot(targets, kind: str, filename: str) -> Path:
    """The lock view (F12) in a free-form race on PostgreSQL: ``waits`` (B and C queue
    behind A, C also behind B) or ``deadlock`` (A and B each wait for the other, shown
    while the server has not broken the cycle yet: their deadlock_timeout is 10 s)."""
    app = LockraceApp(engine="postgres", targets=targets)
    async with app.run_test(size=SIZE) as pilot:
        await asyncio.wait_for(app.ready.wait(), 60)

        async def submit(session: str, sql: str, settle: bool = True) -> None:
            panel = app.panels[session]
            count = panel.status.statements
            panel.input.value = sql
            await panel.input.action_submit()
            if settle:
                await wait_for(pilot, lambda: panel.status.statements > count and (
                    panel.status.running is None or panel.status.running.blocked_since is not None),
                    what=f"{session} to finish or block")

        if kind == "waits":
            await submit("A", "BEGIN;")
            await submit("A", "UPDATE accounts SET balance = balance - 10 WHERE id = 1;")
            await submit("B", "UPDATE accounts SET balance = balance + 10 WHERE id = 1;")
            await submit("C", "BEGIN; LOCK TABLE accounts;")
            await wait_for(pilot, lambda: len(app.race.sessions["C"].running.blockers) == 2, what="C behind A, B")
        else:
            for name, row in (("A", 1), ("B", 2)):
                await submit(name, "BEGIN;")
                await submit(name, f"UPDATE accounts SET balance = 0 WHERE id = {row};")
            for name in "AB":
                await submit(name, "SET deadlock_timeout = '10s';")
            await submit("A", "UPDATE accounts SET balance = 1 WHERE id = 2;")
            await submit("B", "UPDATE accounts SET balance = 2 WHERE id = 1;")
            await wait_for(pilot, lambda: lock_graph(app.race).cycles(), what="the cycle")
        await pilot.pause(1.0)
        await pilot.press("f12")
        await pilot.pause(0.8)
        path = Path(app.save_screenshot(filename, str(OUT)))
        await app._close_race()
    return path


def _start(engine: str, mysqld: str | None):
    """The server for ``engine``; ``mysql8``: a private MySQL from ``mysqld``."""
    if engine != "mysql8":
        return target_for(engine, None)
    before = os.environ.get("LOCKRACE_MYSQLD")
    os.environ["LOCKRACE_MYSQLD"] = str(mysqld)
    try:
        return target_for("mysql", None)
    finally:
        if before is None:
            os.environ.pop("LOCKRACE_MYSQLD", None)
        else:
            os.environ["LOCKRACE_MYSQLD"] = before


async def main(only: str, mysqld: str | None = None) -> int:
    OUT.mkdir(exist_ok=True)
    servers: dict = {}
    made: list[Path] = []
    try:
        shots = [
            ("pg-nowait-refused", "postgres",
             lambda t: scenario_shot(t, "pg-nowait", "postgres", outcome_in("B", "refused"), "pg-nowait-refused.svg")),
            ("pg-lock-timeout-timed-out", "postgres",
             lambda t: scenario_shot(t, "pg-lock-timeout", "postgres", outcome_in("B", "timed_out"),
                                     "pg-lock-timeout-timed-out.svg")),
            ("pg-skip-locked-d-skips", "postgres",
             lambda t: scenario_shot(t, "pg-skip-locked", "postgres", outcome_in("D", "skipped"),
                                     "pg-skip-locked-d-skips.svg")),
            ("mariadb-lock-wait-timeout", "mysql",
             lambda t: scenario_shot(t, "mysql-lock-wait-timeout", "mysql", outcome_in("B", "timed_out"),
                                     "mariadb-lock-wait-timeout.svg")),
            ("mysql-nowait-refused", "mysql8",
             lambda t: scenario_shot(t, "mysql-nowait", "mysql", outcome_in("B", "refused"),
                                     "mysql-nowait-refused.svg")),
            ("mysql-metadata-lock-queue", "mysql8",
             lambda t: scenario_shot(t, "mysql-metadata-lock", "mysql", outcome_in("C", "ok"),
                                     "mysql-metadata-lock-queue.svg")),
            ("free-form-b-blocked-by-a", "postgres",
             lambda t: free_form_shot(t, "postgres", "free-form-b-blocked-by-a.svg")),
            ("lock-view-waits", "postgres", lambda t: lock_view_shot(t, "waits", "lock-view-waits.svg")),
            ("lock-view-deadlock-cycle", "postgres",
             lambda t: lock_view_shot(t, "deadlock", "lock-view-deadlock-cycle.svg")),
            ("pg-standby-recovery-conflict", "postgres-standby",
             lambda t: scenario_shot(t, "pg-standby-recovery-conflict", "postgres-standby",
                                     outcome_in("C", "recovery_conflict"), "pg-standby-recovery-conflict.svg")),
            ("galera-certification-conflict", "galera",
             lambda t: scenario_shot(t, "galera-certification-conflict", "galera",
                                     outcome_in("C", "certification_conflict"), "galera-certification-conflict.svg")),
        ]
        shots = [s for s in shots if only in s[0]]
        if mysqld is None and any(engine == "mysql8" for _, engine, _ in shots):
            print("the MySQL pictures need --mysqld PATH (a MySQL server binary): left out", flush=True)
            shots = [s for s in shots if s[1] != "mysql8"]
        for name, engine, make in shots:
            if engine not in servers:
                servers[engine] = await asyncio.to_thread(_start, engine, mysqld)
            targets = {"mysql" if engine == "mysql8" else engine: servers[engine]}
            global SIZE
            for size in SIZES[1:] + SIZES[:1]:  # the plain name last: each run writes it first
                SIZE = size
                t0 = time.monotonic()
                path = await make(targets)
                if size != SIZES[0]:
                    sized = path.with_name(f"{path.stem}-{size[0]}x{size[1]}{path.suffix}")
                    path.replace(sized)
                    path = sized
                made.append(path)
                print(f"{path.relative_to(ROOT)}  ({time.monotonic() - t0:.1f} s)", flush=True)
    finally:
        for target in servers.values():
            await asyncio.to_thread(target.stop)
    return 0 if made else 1


if __name__ == "__main__":
    argv = sys.argv[1:]
    given = None
    if "--mysqld" in argv:
        at = argv.index("--mysqld")
        if at + 1 >= len(argv):
            sys.exit("screenshots.py: --mysqld needs the path of a MySQL server binary")
        given = argv[at + 1]
        del argv[at:at + 2]
    sys.exit(asyncio.run(main(argv[0] if argv else "", given)))
