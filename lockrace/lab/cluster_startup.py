"""``lockrace bench --cluster galera``: how long a private cluster takes to start.

Each run starts the cluster from scratch (new temp dirs, new ports; the
cached template is kept, as in normal use), times it until every node is
ready (Galera: node2 Synced after its SST), opens a race on it and runs one
statement on every node, then stops it and times the stop.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time

from ..registry import CLUSTER_ENGINES, engine as engine_spec
from ..servers.choose import target_for
from ..servers.cluster import Cluster


async def _first_statement(cluster) -> float:
    from ..backends import open_backend
    from ..engine.race import Race

    t0 = time.perf_counter()
    backend = await open_backend(cluster)
    names = ["A", "C"]
    race = await Race(backend, names).open()
    try:
        for name in names:
            res = await race.run(name, "SELECT 1")
            if res.outcome != "ok":
                raise RuntimeError(f"SELECT 1 on {race.sessions[name].node}: {res.message}")
    finally:
        await race.close()
    return time.perf_counter() - t0


def run(topology: str, runs: int) -> list[dict]:
    rows = []
    for i in range(runs):
        t0 = time.perf_counter()
        cluster = target_for(topology, None)
        assert isinstance(cluster, Cluster), f"{topology} is a cluster"
        started = time.perf_counter() - t0
        try:
            ready = asyncio.run(_first_statement(cluster))
            details = dict(cluster.details)
        finally:
            t1 = time.perf_counter()
            cluster.stop()
            stopped = time.perf_counter() - t1
        rows.append({"run": i + 1, "start_s": round(started, 2), "nodes_ready_s": round(cluster.startup_s, 2),
                     "race_open_s": round(ready, 3), "stop_s": round(stopped, 2), **details})
    return rows


def cmd_cluster_bench(topology: str, runs: int, as_json: bool) -> int:
    if topology not in CLUSTER_ENGINES:
        print(f"lockrace bench: unknown cluster {topology!r} (known: {', '.join(CLUSTER_ENGINES)})", file=sys.stderr)
        return 2
    from ..servers.process import ServerStartError

    try:
        rows = run(topology, max(1, runs))
    except ServerStartError as exc:
        print(f"lockrace: {exc}", file=sys.stderr)
        return 2
    if as_json:
        print(json.dumps(rows, indent=2))
        return 0
    label = engine_spec(topology).label
    print(f"{label}: private cluster start-up, {len(rows)} run(s)")
    print(f"{'run':>3}  {'start s':>8}  {'race open s':>11}  {'stop s':>7}")
    for r in rows:
        print(f"{r['run']:>3}  {r['start_s']:>8.2f}  {r['race_open_s']:>11.3f}  {r['stop_s']:>7.2f}")
    starts = [r["start_s"] for r in rows]
    print(f"median start {statistics.median(starts):.2f} s (min {min(starts):.2f}, max {max(starts):.2f});"
          f" median stop {statistics.median(r['stop_s'] for r in rows):.2f} s")
    return 0
