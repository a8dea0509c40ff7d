"""``lockrace rehearse MIGRATION.sql``: the command.

Everything that can be checked without a server is checked first (files,
policies, numbers).  Then, on the server (a private one lockrace starts, or
--pg / --mysql, inside lockrace's sandbox there): the setup and each
workload statement are run once, and the migration alone with no traffic
(a migration that cannot run at all ends here with one sentence, exit 2);
then each policy is rehearsed on a freshly emptied and set-up sandbox.

The event loop only orchestrates and draws the progress bar: the traffic,
the long transaction and the migration run in plain threads (rehearsal.py).
Ctrl-C (or SIGTERM, SIGHUP, SIGQUIT) ends every connection of the rehearsal
on the server, then drops the sandbox or stops the private server, and
lockrace says so in one line (exit 130).
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from dataclasses import dataclass, field

from ..dialects import family_dialect
from ..registry import SINGLE_ENGINES
from ..runtime.options import ServerChoice
from ..exitguard import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_UNUSABLE, ExitGuard
from .policies import Policy, PolicyError, default_policies, parse_policies
from .sqlfile import (DEFAULT_KEYS, SqlFileError, Statement, dialect, read_migration, read_setup, read_workload,
                      tables_in, target_table, variant_of)

GRACE_S = 1.2  # from a signal to the exit, whatever the server does
ADMIN_TIMEOUT_S = 60.0  # setup on the sandbox (a big --setup may take a while)
DEFAULT_HOLD_MS = 2000
DEFAULT_DURATION_S = 5.0
DEFAULT_CLIENTS = 8
VARIANT_WORDS = {"concurrently": "CONCURRENTLY", "instant": "ALGORITHM=INSTANT"}


class RehearseError(Exception):
    """Unusable input: one sentence."""


@dataclass
class Prepared:
    engine: str
    path: str
    migration: list[Statement]
    setup: list[str]
    workload: list[str]
    policies: list[Policy]
    explicit: bool  # --policies given: a variant that cannot apply is an error, not a note
    table: str | None


def add_parser(sub, server_flags, seconds) -> None:
    p = sub.add_parser(
        "rehearse", help="rehearse a migration against live traffic, under several lock policies",
        description="Run MIGRATION.sql on a real server while bystander clients run a workload and a long "
                    "transaction holds the table, once per policy (each on a fresh sandbox), and measure what "
                    "the bystanders waited: the queue that forms behind a migration waiting for its lock.",
        epilog="policies (comma list; parts joined by +): none (plain DDL, no lock budget); lock_timeout=100ms "
               "(PostgreSQL) or lock_wait_timeout=1 (MySQL/MariaDB, whole seconds): a lock budget per attempt; "
               "retry or retry=N: retry a timed-out attempt, up to N attempts (default 10), with exponential "
               "backoff and jitter; concurrently (PostgreSQL: CREATE/DROP INDEX, REINDEX) or instant "
               "(MySQL/MariaDB: ALTER TABLE ... ALGORITHM=INSTANT); strong_migrations, pgroll: those tools' "
               "documented defaults.  exit status: 0 the migration landed under every policy, 1 it failed "
               "under one, 2 unusable input (bad file, bad SQL, unreachable server), 130 interrupted.",
    )
    p.add_argument("migration", metavar="MIGRATION.sql", help="the migration: one or more SQL statements")
    p.add_argument("--engine", choices=SINGLE_ENGINES, default="postgres",
                   help="postgres (default) or mysql (MariaDB/MySQL)")
    p.add_argument("--setup", metavar="FILE", help="SQL that creates the tables and rows (default: accounts with "
                   f"{DEFAULT_KEYS:,} rows)")
    p.add_argument("--workload", metavar="FILE",
                   help="the bystanders' statements, one a line; :id is a random key from 1 to --keys "
                        "(default: point reads and updates of accounts)")
    p.add_argument("--keys", type=_positive_int, default=DEFAULT_KEYS, metavar="N",
                   help=f"the range of :id (default {DEFAULT_KEYS})")
    p.add_argument("--clients", type=_positive_int, default=DEFAULT_CLIENTS, metavar="N",
                   help=f"bystander clients (default {DEFAULT_CLIENTS})")
    p.add_argument("--duration", type=seconds, default=DEFAULT_DURATION_S, metavar="S",
                   help=f"how long the traffic runs once the migration started, and how long retries may go on "
                        f"(default {DEFAULT_DURATION_S:g}; longer while the migration still runs)")
    p.add_argument("--hold-ms", type=_non_negative_int, default=DEFAULT_HOLD_MS, metavar="N",
                   help=f"a long transaction reads the table and holds its lock this long, started before the "
                        f"migration (default {DEFAULT_HOLD_MS}; 0 for none)")
    p.add_argument("--policies", metavar="LIST",
                   help="comma list of policies (default: none, lock_timeout=100ms+retry, strong_migrations, pgroll "
                        "and concurrently on PostgreSQL; none, lock_wait_timeout=1+retry, strong_migrations and "
                        "instant on MySQL/MariaDB; a variant only where the migration allows it)")
    p.add_argument("--json", action="store_true", help="print JSON instead of the table, chart and verdicts")
    server_flags(p)


def _positive_int(text: str) -> int:
    import argparse

    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, got {text!r}")
    return int(text)


def _non_negative_int(text: str) -> int:
    import argparse

    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"must be a whole number of milliseconds (0 or more), got {text!r}")
    return int(text)


@dataclass(frozen=True)
class RehearseOptions:
    """``lockrace rehearse``, as the command line chose it."""

    migration: str
    engine: str = "postgres"
    setup: str | None = None
    workload: str | None = None
    keys: int = DEFAULT_KEYS
    clients: int = DEFAULT_CLIENTS
    duration: float = DEFAULT_DURATION_S
    hold_ms: int = DEFAULT_HOLD_MS
    policies: str | None = None
    json: bool = False
    servers: ServerChoice = field(default_factory=ServerChoice)


def prepare(args: RehearseOptions) -> Prepared:
    """Read and check everything that needs no server."""
    engine = args.engine
    migration = read_migration(args.migration, engine)
    setup = read_setup(args.setup, engine)
    workload = read_workload(args.workload)
    explicit = args.policies is not None
    if args.policies is not None:
        policies = parse_policies(args.policies, engine)
    else:
        policies = default_policies(engine)
        variant = family_dialect(engine).online_ddl
        if variant_of(migration, variant, engine) is not None:
            policies.append(parse_policies(variant, engine)[0])
    for p in policies:
        if p.variant and variant_of(migration, p.variant, engine) is None:
            raise RehearseError(f"the policy {p.name} asks for {VARIANT_WORDS[p.variant]}, but no statement of "
                                f"{args.migration} has such a form")
    table = next((t for t in (target_table(s) for s in migration) if t), None)
    if table is None:
        table = next((t for line in workload for t in tables_in(line, engine)), None)
    if table is None and args.hold_ms > 0:
        raise RehearseError(f"cannot tell which table {args.migration} changes, so the long transaction has "
                            "nothing to read: give --hold-ms 0, or a workload that names the table")
    return Prepared(engine, args.migration, migration, setup, workload, policies, explicit, table)


def cmd_rehearse(args: RehearseOptions) -> int:
    try:
        prep = prepare(args)
    except (SqlFileError, PolicyError, RehearseError) as exc:
        print(f"lockrace rehearse: {exc}", file=sys.stderr)
        return EXIT_UNUSABLE
    guard = ExitGuard(GRACE_S)
    code = EXIT_INTERRUPTED
    try:
        code = asyncio.run(_rehearse(prep, args, guard))
    except (KeyboardInterrupt, asyncio.CancelledError):
        guard.fired = True
    if guard.fired:
        guard.exit_now()  # servers stopped, one line said, exit 130
    return code


def _say(text: str) -> None:
    print(f"lockrace: {text}", file=sys.stderr)


def _progress(console):
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    return Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                    console=console, transient=True, disable=not console.is_terminal)


async def _rehearse(prep: Prepared, args: RehearseOptions, guard: ExitGuard) -> int:
    from rich.console import Console

    from ..backends.base import ConnectError
    from ..core.serverwide import refuse_server_wide, server_wide
    from ..runtime.pool import ServerUnavailable
    from ..runtime.races import server_pool

    try:
        guard.install(asyncio.get_running_loop(), asyncio.current_task())
    except (ValueError, RuntimeError):  # not the main thread (an embedding caller): no signals here
        pass
    err = Console(stderr=True)
    engine = prep.engine
    servers = server_pool(args.servers, say=_say)
    guard.stoppers.append(servers)
    state = {"rehearsal": None}
    try:
        with _progress(err) as progress:
            task = progress.add_task(servers.starting_text(engine), total=None)
            try:
                backend = await servers.backend(engine)
            except ServerUnavailable as exc:
                progress.stop()
                _say(str(exc))
                return EXIT_UNUSABLE
            if not servers.targets[engine].owned:
                texts = [("the migration", s.text) for s in prep.migration] + [("the setup", s) for s in prep.setup] \
                    + [("the workload", s) for s in prep.workload]
                for what, text in texts:
                    wide = server_wide(text, dialect(engine))
                    if wide:
                        progress.stop()
                        print(f"lockrace rehearse: {refuse_server_wide(what, wide)}", file=sys.stderr)
                        return EXIT_UNUSABLE
            backend.admin_timeout = ADMIN_TIMEOUT_S
            progress.update(task, description=f"{backend.server_name}: checking the migration alone")
            runs, alone_ms, notes = await _check(backend, prep)
            progress.update(task, total=1, completed=1, description=f"{backend.server_name} "
                            f"({servers.origin(engine)}): the migration alone takes {_short(alone_ms)}")
            results = []
            for i, (policy, stmts) in enumerate(runs, 1):
                results.append(await _one(backend, prep, args, policy, stmts, progress, f"{i}/{len(runs)}", state))
        out = Console() if not args.json else None
        if args.json:
            from .jsonout import report_dict

            print(json.dumps(report_dict(results), indent=2))
        else:
            _show(results, prep, args, backend, servers.origin(engine), alone_ms, notes, out)
        return EXIT_OK if all(r.migration.outcome == "done" for r in results) else EXIT_FAILED
    except asyncio.CancelledError:
        rehearsal = state["rehearsal"]
        if rehearsal is not None:
            await asyncio.to_thread(rehearsal.stop)
            await asyncio.to_thread(rehearsal.done.wait, 0.4)
        return EXIT_INTERRUPTED
    except (RehearseError, ConnectError) as exc:  # after the progress bar is gone
        print(f"lockrace rehearse: {exc}", file=sys.stderr)
        return EXIT_UNUSABLE
    except _driver_errors() as exc:  # the server went away between two steps
        print(f"lockrace rehearse: the server stopped answering: {_error_text(exc)}", file=sys.stderr)
        return EXIT_UNUSABLE
    finally:
        await servers.close(quick=guard.fired)


def _driver_errors() -> tuple[type[BaseException], ...]:
    import psycopg
    import pymysql

    return (psycopg.Error, pymysql.MySQLError)  # not OSError: a closed stdout (| head) is cli.main's to end


def _short(ms: float) -> str:
    from .report import seconds

    return seconds(ms)


async def _fresh(backend, prep: Prepared) -> None:
    """An emptied sandbox with the setup in it."""
    await backend.reset_sandbox()
    try:
        await backend.run_admin(prep.setup)
    except Exception as exc:
        raise RehearseError(f"the setup does not run on {backend.server_name}: {_error_text(exc)}") from None


async def _check(backend, prep: Prepared) -> tuple[list[tuple[Policy, list[Statement]]], float, list[str]]:
    """The setup, each workload statement once and the migration alone (plain, and each variant
    the policies ask for), each on a fresh sandbox: what runs under which policy."""
    from .rehearsal import check_workload, run_alone

    engine = prep.engine
    await _fresh(backend, prep)
    bad = await asyncio.to_thread(check_workload, backend, prep.workload)
    if bad is not None:
        line, failure = bad
        raise RehearseError(f"workload statement {line} ({prep.workload[line - 1]}) does not run on "
                            f"{backend.server_name}: {failure.sentence()}")
    alone_ms, alone_failure = await asyncio.to_thread(run_alone, backend, prep.migration, engine)
    if alone_failure is not None:
        raise RehearseError(f"{prep.path} does not run on {backend.server_name} even alone: "
                            f"{alone_failure.sentence()}")
    forms: dict[str | None, list[Statement] | None] = {None: prep.migration}
    notes: list[str] = []
    runs = []
    for policy in prep.policies:
        variant = policy.variant
        if variant is not None and variant not in forms:
            stmts = variant_of(prep.migration, variant, engine)
            assert stmts is not None, "policies whose variant no statement has were refused when read"
            await _fresh(backend, prep)
            _, variant_failure = await asyncio.to_thread(run_alone, backend, stmts, engine)
            if variant_failure is not None:
                said = (f"{backend.server_name} refuses {VARIANT_WORDS[variant]} for {prep.path}: "
                        f"{variant_failure.sentence()}")
                if prep.explicit:
                    raise RehearseError(said)
                notes.append(f"not rehearsed: {policy.name} ({said})")
                forms[policy.variant] = None
                continue
            forms[policy.variant] = stmts
        form = forms[variant]
        if form is not None:
            runs.append((policy, form))
    return runs, alone_ms, notes


async def _one(backend, prep: Prepared, args: RehearseOptions, policy: Policy, stmts, progress, count: str, state):
    from .rehearsal import Plan, Rehearsal, RehearsalError

    task = progress.add_task(f"{count} {policy.name}: setting up", total=None)
    await _fresh(backend, prep)
    plan = Plan(prep.engine, args.clients, args.duration, args.hold_ms, args.keys, prep.workload, prep.table or "")
    rehearsal = Rehearsal(backend, plan, policy, stmts)
    state["rehearsal"] = rehearsal
    threading.Thread(target=rehearsal.run, name="lockrace-rehearsal", daemon=True).start()
    while not rehearsal.done.is_set():
        total = max(rehearsal.planned_s(), rehearsal.elapsed_s())
        phase = rehearsal.phase
        mig = rehearsal.migration
        if mig is not None and phase == "migration":
            phase = f"migration, attempt {len(mig.result.attempts) + (1 if mig.attempting else 0)}"
        progress.update(task, total=total, completed=rehearsal.elapsed_s(), description=f"{count} {policy.name}: {phase}")
        await asyncio.sleep(0.05)
    state["rehearsal"] = None
    progress.update(task, completed=1, total=1, visible=False)
    if rehearsal.error is not None:
        exc = rehearsal.error
        if isinstance(exc, RehearsalError):
            raise RehearseError(str(exc))
        raise RehearseError(f"the rehearsal of {policy.name} could not run: {_error_text(exc)}")
    result = rehearsal.result
    assert result is not None, "a rehearsal without an error has its result"
    if result.lost:
        said = next(iter(result.bystander_failures), "")
        raise RehearseError(f"the bystanders lost their connections during the rehearsal of {policy.name}"
                            + (f" ({said})" if said else "") + "; the server went away or ended them")
    return result


def _error_text(exc: BaseException) -> str:
    args = exc.args
    if len(args) == 2 and isinstance(args[0], int):
        return f"ERROR {args[0]}: {args[1]}"
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _show(results, prep: Prepared, args: RehearseOptions, backend, origin: str, alone_ms: float, notes: list[str], out) -> None:
    from rich.console import Console

    from .report import CHART_COLUMNS, chart, table, verdict
    from .stats import QUEUE_MS

    if not out.is_terminal:
        out = Console(width=160)
    hold = f"a long transaction holding {prep.table} for {args.hold_ms} ms" if args.hold_ms else "no long transaction"
    title = f"Rehearsal of {prep.path} on {backend.server_name} ({origin})"
    caption = (f"{args.clients} bystander clients; {hold}; alone (no traffic) the migration takes {_short(alone_ms)}; "
               f"waits measured around every statement, the queue counted from {QUEUE_MS:g} ms")
    out.print(table(results, title, caption))
    print()
    name_width = max([8] + [len(r.policy.name) for r in results])
    for line in chart(results, columns=max(20, min(CHART_COLUMNS, out.width - name_width - 2))):
        print(line)
    print()
    for r in results:
        out.print(verdict(r, prep.engine), highlight=False)
        for text, n in list(r.bystander_failures.items())[:3]:
            out.print(f"  {n} x {text}", highlight=False)
    for note in notes:
        out.print(note, highlight=False)
