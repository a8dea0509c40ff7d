"""Start-up time of lockrace's private PostgreSQL primary + hot standby.

    python bench/pg_standby_startup.py [--runs 5] [--json]

Each run starts a pair from the embedded PostgreSQL install (primary from the
cached template, standby from pg_basebackup -R), waits until the standby
streams and has replayed the primary's WAL, then stops both.  Prints the
phases per run and their medians.  The first run may include making the
template data directory (initdb, once per machine).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lockrace.servers.pg_standby import StandbyPair  # noqa: E402

PHASES = ("primary_s", "basebackup_s", "standby_start_s", "caught_up_s", "total_s")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    runs = []
    for _ in range(args.runs):
        pair = StandbyPair().start()
        t0 = time.perf_counter_ns()
        pair.stop()
        timings = dict(pair.timings, stop_s=(time.perf_counter_ns() - t0) / 1e9)
        runs.append(timings)
    keys = PHASES + ("stop_s",)
    medians = {k: statistics.median(r[k] for r in runs) for k in keys}
    if args.json:
        print(json.dumps({"runs": runs, "median": medians}, indent=2))
        return 0
    print("PostgreSQL primary + hot standby (embedded PostgreSQL), seconds")
    print("(primary: start from the template; basebackup: pg_basebackup -R; standby_start: until it streams;")
    print(" caught_up: until it replayed the primary's WAL; total: all of these; stop: both stopped, dirs removed)")
    print("run  " + "  ".join(f"{k[:-2]:>13}" for k in keys))
    for i, r in enumerate(runs, 1):
        print(f"{i:>3}  " + "  ".join(f"{r[k]:>13.3f}" for k in keys))
    print("med  " + "  ".join(f"{medians[k]:>13.3f}" for k in keys))
    return 0


if __name__ == "__main__":
    sys.exit(main())
