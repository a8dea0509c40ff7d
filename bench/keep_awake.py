"""What the loop's keep-awake tick buys a caller: a bounded lock wait that ends in a
timeout, timed as ``lockrace bench --overhead`` times it (the wall around
``Race.run``, the bare driver's ``cursor.execute`` beside it), with the tick on
(every 20 ms while an answer is due: see ``lockrace/backends/loop_answer.py``)
and off, all ways interleaved in one process.

Session H holds row 1; the waiter asks for it with a 100 ms lock_timeout
(PostgreSQL) or innodb_lock_wait_timeout = 1 (MariaDB/MySQL).

    python bench/keep_awake.py [--engine mysql|postgres] [--runs 30] [--ticks 20] [--mysql DSN] [--pg DSN]

``--ticks 10,20,50`` compares several tick periods (ms) in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
from pathlib import Path
from time import perf_counter_ns

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lockrace.backends import loop_answer  # noqa: E402
from lockrace.engine.race import Race  # noqa: E402
from lockrace.lab.holder_waiter import setup_sql  # noqa: E402
from lockrace.lab.modes import HOLD_SQL, TABLE  # noqa: E402
from lockrace.lab.modes import LabError  # noqa: E402
from lockrace.lab.overhead import CALLER_SLACK_MS, RawWaiter, _must, cases_for  # noqa: E402
from lockrace.runtime.pool import ServerPool  # noqa: E402
from lockrace.registry import SINGLE_ENGINES  # noqa: E402

WARMUP = 3


def _ways(ticks_ms: list[float]) -> dict[str, float | None]:
    """way -> the tick period it runs with (s; None: off), the bare driver first."""
    ways: dict[str, float | None] = {"raw": None}
    ways.update({f"tick {ms:g} ms": ms / 1000 for ms in ticks_ms})
    ways["tick off"] = None
    return ways


async def measure(engine: str, dsn: str | None, runs: int, ticks_ms: list[float]) -> dict[str, list[float]]:
    pool = ServerPool({engine: dsn})
    tick = loop_answer.AWAKE_TICK_S
    ways = _ways(ticks_ms)
    order = list(ways)
    race = raw = backend = None
    try:
        backend = await pool.backend(engine)
        await backend.run_admin(setup_sql(engine))
        raw = RawWaiter(backend, pool.targets[engine])
        await asyncio.to_thread(raw.connect)
        race = await Race(backend, ["H", "W"]).open()
        await _must(race, "H", "BEGIN")
        await _must(race, "H", HOLD_SQL)
        case = next(c for c in cases_for(engine) if c.key == "bounded")
        await _must(race, "W", case.setup)
        raw.execute(case.setup)
        waits: dict[str, list[float]] = {way: [] for way in order}
        for i in range(WARMUP + runs):
            turn = i % len(order)
            for way in order[turn:] + order[:turn]:
                if way == "raw":
                    ms, failed = raw.execute(case.sql)
                    if not failed:
                        raise SystemExit(f"raw driver: {case.sql} did not time out")
                else:
                    loop_answer.AWAKE_TICK_S = ways[way]
                    t0 = perf_counter_ns()
                    res = await race.run("W", case.sql)
                    ms = (perf_counter_ns() - t0) / 1e6
                    await race.settled("W")
                    if res.outcome != "timed_out":
                        raise SystemExit(f"lockrace: {case.sql}: {res.outcome} {res.message}")
                if i >= WARMUP:
                    waits[way].append(ms)
            print(f"\r{i + 1}/{WARMUP + runs}", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
        return waits
    finally:
        loop_answer.AWAKE_TICK_S = tick
        if raw is not None:
            raw.close()
        if race is not None:
            await race.close()
        if backend is not None:
            with contextlib.suppress(Exception):
                await backend.run_admin([f"DROP TABLE IF EXISTS {TABLE}"])
        await pool.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", choices=SINGLE_ENGINES, default="mysql")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--ticks", default=f"{(loop_answer.AWAKE_TICK_S or 0.02) * 1000:g}",
                    help="tick periods to compare, ms, comma-separated (default: lockrace's own)")
    ap.add_argument("--mysql", dest="dsn_mysql")
    ap.add_argument("--pg", dest="dsn_pg")
    args = ap.parse_args(argv)
    dsn = args.dsn_mysql if args.engine == "mysql" else args.dsn_pg
    try:
        ticks_ms = [float(t) for t in args.ticks.split(",") if t.strip()]
    except ValueError:
        ap.error(f"--ticks: not a list of numbers: {args.ticks!r}")
    if any(t <= 0 for t in ticks_ms):
        ap.error("--ticks: periods must be > 0 ms")
    try:
        waits = asyncio.run(measure(args.engine, dsn, args.runs, ticks_ms))
    except LabError as exc:
        print(f"bench/keep_awake.py: {exc}", file=sys.stderr)
        return 2
    raw = statistics.median(waits["raw"])
    print(f"{args.engine}: a bounded wait that times out, what the caller waits, medians of {args.runs} runs each")
    for way in waits:
        med = statistics.median(waits[way])
        extra = "" if way == "raw" else (f"  overhead {med - raw:+.2f} ms, target <= raw + {CALLER_SLACK_MS} ms: "
                                         f"{'met' if med - raw <= CALLER_SLACK_MS else 'MISSED'}")
        print(f"  {way:12} median {med:9.2f} ms  min {min(waits[way]):9.2f}  max {max(waits[way]):9.2f}{extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
