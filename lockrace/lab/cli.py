"""``lockrace bench``: the holder-vs-waiter table, or ``--overhead``."""

from __future__ import annotations

import asyncio
import json
import sys

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .modes import LabError, make_config

EXIT_OK, EXIT_FAILED, EXIT_UNUSABLE = 0, 1, 2


def cmd_bench(args) -> int:
    # Check what can be checked before any server starts.
    guess = "postgres" if args.engine == "postgres" else "mariadb"
    try:
        if not args.overhead:
            make_config(args.engine, guess, args.runs, args.hold_ms, args.budget_ms, args.modes)
        elif args.runs < 1:
            raise LabError("--runs must be at least 1")
    except LabError as exc:
        print(f"lockrace bench: {exc}", file=sys.stderr)
        return EXIT_UNUSABLE
    return asyncio.run(_bench(args))


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=console, transient=True, disable=not console.is_terminal,
    )


async def _bench(args) -> int:
    from ..cli import Servers, ServerUnavailable

    out = Console()
    if not out.is_terminal:
        out = Console(width=120)  # a file or pipe: keep the table on one line per mode
    err = Console(stderr=True)
    servers = Servers(args.pg, args.mysql)
    try:
        try:
            backend = await servers.backend(args.engine)
        except ServerUnavailable as exc:
            print(f"lockrace: {exc}", file=sys.stderr)
            return EXIT_UNUSABLE
        if args.overhead:
            return await _overhead(args, backend, servers.targets[args.engine], out, err)
        return await _holder_waiter(args, backend, out, err)
    except LabError as exc:
        print(f"lockrace bench: {exc}", file=sys.stderr)
        return EXIT_UNUSABLE
    finally:
        await servers.close()


async def _holder_waiter(args, backend, out: Console, err: Console) -> int:
    from .holder_waiter import HolderWaiterLab
    from .table import lab_json, lab_notes, lab_table

    cfg = make_config(args.engine, backend.flavor, args.runs, args.hold_ms, args.budget_ms, args.modes)
    with _progress(err) as progress:
        task = progress.add_task(f"holder vs waiter on {backend.server_name}", total=None)

        def on_run(mode, sample, done, total):
            progress.update(task, completed=done, total=total, description=f"{mode.label:<28}")

        result = await HolderWaiterLab(backend, cfg, on_run).run()
    if args.json:
        print(json.dumps(lab_json(result), indent=2))
    else:
        out.print(lab_table(result))
        for line in lab_notes(result):
            out.print(line, highlight=False)
    failed = any(mr.problems for mr in result.modes.values())
    return EXIT_FAILED if failed else EXIT_OK


async def _overhead(args, backend, target, out: Console, err: Console) -> int:
    from .overhead import OverheadBench
    from .table import overhead_json, overhead_notes, overhead_table

    bench = OverheadBench(backend, target, runs=args.runs)
    with _progress(err) as progress:
        task = progress.add_task(f"engine vs raw driver on {backend.server_name}", total=None)

        def on_run(label, done, total):
            progress.update(task, completed=done, total=total, description=f"{label:<28}")

        result = await bench.run(on_run)
    if args.json:
        print(json.dumps(overhead_json(result), indent=2))
    else:
        out.print(overhead_table(result))
        for line in overhead_notes(result):
            out.print(line, highlight=False)
    return EXIT_OK if result.targets_met() else EXIT_FAILED
