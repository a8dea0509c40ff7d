"""Soak: many scenario runs in a row in one process.

Runs built-in scenarios back to back on each engine -- each run opens a Race,
resets the sandbox, runs every step, tears down and closes, exactly as
``lockrace run`` does -- and prints, at the start, the middle and the end:
connections lockrace holds on the server (the server's own count), threads,
open file descriptors and resident memory of this process.

    python bench/soak.py                      # 200 runs on each engine, private servers
    python bench/soak.py --runs 50 --engine postgres
    python bench/soak.py --pg postgresql://postgres@127.0.0.1:5432/postgres --json

tests/engine/test_fault_soak.py runs the same code, shorter, and asserts no growth.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lockrace.backends import open_backend  # noqa: E402
from lockrace.engine.race import Race  # noqa: E402
from lockrace.engine.runner import ScenarioRunner  # noqa: E402
from lockrace.scenario.library import resolve  # noqa: E402
from lockrace.servers.target import Target, mysql_target, pg_target  # noqa: E402
from lockrace.registry import SINGLE_ENGINES  # noqa: E402

# Short scenarios with blocking, refusals, SKIP LOCKED and rollbacks, taken in turn.
SCENARIOS = {
    "postgres": ["pg-nowait", "pg-skip-locked", "pg-row-lock-modes"],
    "mysql": ["mysql-nowait", "mysql-skip-locked"],
}


@dataclass
class Sample:
    label: str
    runs: int
    server_connections: int
    threads: int
    os_threads: int
    fds: int
    rss_kib: int


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def server_connections(target: Target) -> int:
    """Connections lockrace holds, counted by the server (not by lockrace)."""
    if target.family == "postgres":
        import psycopg

        with psycopg.connect(target.conninfo, autocommit=True, application_name="soak-check") as conn:
            return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'lockrace%'"
                                " AND pid <> pg_backend_pid()").fetchone()[0]
    import pymysql

    conn = pymysql.connect(**target.mysql_kwargs, autocommit=True)
    try:
        cur = conn.cursor()
        # lockrace's sessions and monitor use the sandbox database; admin connections are short-lived
        cur.execute("SELECT count(*) FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID()"
                    " AND (DB = %s OR COMMAND = 'Query' AND USER <> 'system user')", (target.sandbox,))
        return int(cur.fetchone()[0])
    finally:
        conn.close()


def sample(label: str, runs: int, target: Target) -> Sample:
    gc.collect()
    fds = len(os.listdir("/proc/self/fd"))  # before the checker's own connection
    threads = threading.active_count()
    os_threads = len(os.listdir("/proc/self/task"))
    rss = rss_kib()
    return Sample(label, runs, server_connections(target), threads, os_threads, fds, rss)


async def one_run(backend, name: str) -> bool:
    scenario = resolve(name)
    race = Race(backend, scenario.session_names())
    await race.open()
    try:
        runner = ScenarioRunner(race, scenario, step_timeout=10)
        report = await runner.run()
        await runner.teardown()
    finally:
        await race.close()
    return report.passed


async def soak(target: Target, runs: int, on_sample=None) -> dict:
    """Run ``runs`` scenario runs on ``target``; samples after a warm-up run,
    at the middle and at the end."""
    backend = await open_backend(target)
    names = SCENARIOS[target.family]
    samples: list[Sample] = []
    failures: list[str] = []
    # one warm-up run of each scenario: imports, caches and thread pools settle first
    for name in names:
        if not await one_run(backend, name):
            failures.append(f"warm-up {name}")
    await asyncio.sleep(0.2)
    samples.append(await asyncio.to_thread(sample, "start", 0, target))
    on_sample and on_sample(samples[-1])
    t0 = time.perf_counter()
    for i in range(1, runs + 1):
        name = names[i % len(names)]
        if not await one_run(backend, name):
            failures.append(f"run {i} {name}")
        if i == runs // 2 or i == runs:
            await asyncio.sleep(0.2)  # let the server notice closed sockets
            samples.append(await asyncio.to_thread(sample, "middle" if i < runs else "end", i, target))
            on_sample and on_sample(samples[-1])
    wall = time.perf_counter() - t0
    if target.origin == "DSN":
        await backend.drop_sandbox()
    return {"engine": target.family, "server": backend.server_name, "origin": target.origin, "runs": runs,
            "seconds": round(wall, 2), "ms_per_run": round(wall * 1000 / max(runs, 1), 1),
            "failures": failures, "samples": [asdict(s) for s in samples]}


def print_table(result: dict) -> None:
    print(f"{result['server']} ({result['origin']}): {result['runs']} runs of {', '.join(SCENARIOS[result['engine']])}"
          f" in {result['seconds']} s ({result['ms_per_run']} ms/run), failed runs: {len(result['failures'])}")
    print(f"  {'at':<7} {'runs':>5} {'server conns':>12} {'threads':>8} {'os threads':>10} {'fds':>5} {'RSS MiB':>8}")
    for s in result["samples"]:
        print(f"  {s['label']:<7} {s['runs']:>5} {s['server_connections']:>12} {s['threads']:>8} {s['os_threads']:>10}"
              f" {s['fds']:>5} {s['rss_kib'] / 1024:>8.1f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=SINGLE_ENGINES, action="append",
                        help="engine to soak (repeatable; default both)")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--pg", metavar="DSN")
    parser.add_argument("--mysql", metavar="DSN")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    results = []
    for engine in args.engine or ["postgres", "mysql"]:
        target = pg_target(args.pg) if engine == "postgres" else mysql_target(args.mysql)
        try:
            result = asyncio.run(soak(target, args.runs))
        finally:
            target.stop()
        results.append(result)
        if not args.json:
            print_table(result)
    if args.json:
        print(json.dumps(results, indent=2))
    return 0 if all(not r["failures"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
