"""``lockrace bench``: the holder-vs-waiter table, or ``--overhead``."""

from __future__ import annotations

import asyncio
import json
import sys

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from ..registry import SINGLE_ENGINES, engine as engine_spec
from ..runtime.options import BenchOptions, ServerChoice
from .modes import LabError, make_config

from ..exitguard import EXIT_FAILED, EXIT_OK, EXIT_UNUSABLE


def cmd_bench(args: BenchOptions) -> int:
    # Check what can be checked before any server starts.
    guess = engine_spec(args.engine).flavors[0]
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
    """Progress bars on stderr while the bench works: only when stderr is a terminal
    (a pipe or file stays quiet); stdout carries nothing but the table or JSON."""
    return Progress(
        SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=console, transient=True, disable=not console.is_terminal,
    )


async def _bench(args) -> int:
    from ..runtime.pool import ServerUnavailable
    from ..runtime.races import server_pool

    out = Console()
    if not out.is_terminal:
        out = Console(width=120)  # a file or pipe: keep the table on one line per mode
    err = Console(stderr=True)
    servers = server_pool(ServerChoice({e: args.servers.dsn(e) for e in SINGLE_ENGINES}))
    try:
        with _progress(err) as progress:
            where = ("connecting to the server" if args.servers.dsn(args.engine)
                     else f"starting {engine_spec(args.engine).private}")
            start = progress.add_task(where, total=None)
            try:
                backend = await servers.backend(args.engine)
            except ServerUnavailable as exc:
                progress.stop()
                print(f"lockrace: {exc}", file=sys.stderr)
                return EXIT_UNUSABLE
            progress.update(start, description=f"{backend.server_name} ({servers.origin(args.engine)})",
                            total=1, completed=1)
            if args.overhead:
                result = await _overhead_runs(args, backend, servers.targets[args.engine], progress)
            else:
                result = await _holder_waiter_runs(args, backend, progress)
        if args.overhead:
            return _overhead_report(args, result, out)
        return _holder_waiter_report(args, result, out)
    except LabError as exc:
        print(f"lockrace bench: {exc}", file=sys.stderr)
        return EXIT_UNUSABLE
    finally:
        await servers.close()


async def _holder_waiter_runs(args: BenchOptions, backend, progress: Progress):
    from .holder_waiter import HolderWaiterLab

    cfg = make_config(args.engine, backend.flavor, args.runs, args.hold_ms, args.budget_ms, args.modes)
    overall = progress.add_task(f"holder vs waiter, {len(cfg.plan)} modes", total=None)
    # one bar per mode (warm-up runs included), filled as its runs finish
    bars = {mode.key: progress.add_task(f"  {mode.label}", total=cfg.runs + cfg.warmup) for mode in cfg.plan}

    def on_run(mode, sample, done, total):
        progress.update(bars[mode.key], advance=1)
        progress.update(overall, completed=done, total=total)

    lab = HolderWaiterLab(backend, cfg, on_run)
    return await lab.run()


def _holder_waiter_report(args: BenchOptions, result, out: Console) -> int:
    from .table import lab_json, lab_notes, lab_table

    if args.json:
        print(json.dumps(lab_json(result), indent=2))
    else:
        out.print(lab_table(result))
        for line in lab_notes(result):
            out.print(line, highlight=False)
    failed = any(mr.problems for mr in result.modes.values())
    return EXIT_FAILED if failed else EXIT_OK


async def _overhead_runs(args: BenchOptions, backend, target, progress: Progress):
    from .overhead import OverheadBench

    bench = OverheadBench(backend, target, runs=args.runs)
    task = progress.add_task(f"engine vs raw driver on {backend.server_name}", total=None)

    def on_run(label, done, total):
        progress.update(task, completed=done, total=total, description=f"{label:<28}")

    return await bench.run(on_run)


def _overhead_report(args: BenchOptions, result, out: Console) -> int:
    from .table import overhead_json, overhead_notes, overhead_table

    if args.json:
        print(json.dumps(overhead_json(result), indent=2))
    else:
        out.print(overhead_table(result))
        for line in overhead_notes(result):
            out.print(line, highlight=False)
    return EXIT_OK if result.targets_met() else EXIT_FAILED
