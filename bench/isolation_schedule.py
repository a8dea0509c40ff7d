"""Run PostgreSQL's whole isolation schedule through ``lockrace run``.

    python bench/isolation_schedule.py UPSTREAM [--pg DSN] [--only a,b] [--chunk N] [--json FILE]

UPSTREAM is a PostgreSQL source checkout (or any directory holding
``src/test/isolation/{isolation_schedule,specs,expected}``, or those three
directly).  Every spec named by ``test:`` lines of the schedule runs as
``lockrace run SPEC... --expected EXPECTED_DIR --format json`` (N specs per
invocation, default 20: one server start per invocation), on lockrace's own
server or on ``--pg DSN``.  Prints one line per spec that differs, then the
figures: matched / total, wall time.  Not used by the tests.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path


def isolation_dir(root: Path) -> Path:
    for cand in (root / "src" / "test" / "isolation", root):
        if (cand / "isolation_schedule").exists():
            return cand
    raise SystemExit(f"no isolation_schedule under {root}")


def schedule(iso: Path) -> list[str]:
    names = []
    for line in (iso / "isolation_schedule").read_text().splitlines():
        if line.startswith("test:"):
            names.extend(line.split(":", 1)[1].split())
    return names


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("upstream", type=Path)
    ap.add_argument("--pg", help="a PostgreSQL server by DSN (default: lockrace's own)")
    ap.add_argument("--only", help="comma-separated spec names")
    ap.add_argument("--chunk", type=int, default=20)
    ap.add_argument("--step-timeout", default="60")
    ap.add_argument("--json", type=Path, help="write every spec's result here")
    ap.add_argument("--show-diff", action="store_true")
    args = ap.parse_args()

    iso = isolation_dir(args.upstream)
    names = schedule(iso)
    if args.only:
        wanted = set(args.only.split(","))
        names = [n for n in names if n in wanted]
    results: dict[str, dict] = {}
    t0 = time.perf_counter()
    for i in range(0, len(names), args.chunk):
        part = names[i:i + args.chunk]
        cmd = [sys.executable, "-m", "lockrace", "run", *[str(iso / "specs" / f"{n}.spec") for n in part],
               "--expected", str(iso / "expected"), "--format", "json", "--step-timeout", args.step_timeout]
        if args.pg:
            cmd += ["--pg", args.pg]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        try:
            doc = json.loads(proc.stdout)
        except ValueError:
            doc = {"specs": []}
        got = {r["spec"]: r for r in doc["specs"]}
        for n in part:
            r = got.get(n)
            if r is None:
                r = {"spec": n, "matches_expected": False, "seconds": 0,
                     "diff": f"no result (exit {proc.returncode}): {proc.stderr.strip()[-400:]}"}
            results[n] = r
            if not r["matches_expected"]:
                print(f"DIFFERS {n} [{r['seconds']} s]", flush=True)
                if args.show_diff:
                    print(r["diff"], flush=True)
        print(f"... {min(i + args.chunk, len(names))}/{len(names)} ({time.perf_counter() - t0:.0f} s)",
              file=sys.stderr, flush=True)
    matched = sum(1 for r in results.values() if r["matches_expected"])
    spent = sum(r["seconds"] for r in results.values())
    where = args.pg or "lockrace's own server"
    print(f"{matched}/{len(names)} specs match on {where}; specs ran {spent:.1f} s, "
          f"{time.perf_counter() - t0:.1f} s in all")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0 if matched == len(names) else 1


if __name__ == "__main__":
    sys.exit(main())
