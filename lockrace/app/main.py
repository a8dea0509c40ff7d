"""``lockrace`` with no command: open the app."""

from __future__ import annotations

import concurrent.futures
import os
import sys

from .. import exitguard
from ..exitguard import EXIT_INTERRUPTED, EXIT_UNUSABLE, INTERRUPTED_LINE
from ..scenario.errors import ScenarioError
from ..scenario.library import resolve
from ..registry import Engine
from ..runtime.options import ServerChoice
from ..servers.cluster import Cluster
from ..servers.target import PG_ENV, Target, standby_refusal
from .palette import COLOURS_ENV, read_overrides


def _say(line: str) -> None:
    """A last line on stderr, which may be a terminal that has gone away (closed window, ended ssh)."""
    try:
        print(line, file=sys.stderr, flush=True)
    except OSError:
        pass


def run_app(engine: str, scenario: str | None, servers: ServerChoice | None = None,
            targets: dict[str, Target | Cluster] | None = None) -> int:
    """Run the app until the user quits; servers it started are stopped on the way out."""
    servers = servers or ServerChoice()
    colours = None
    if os.environ.get(COLOURS_ENV):
        try:
            colours = read_overrides(os.environ[COLOURS_ENV])
        except ValueError as exc:
            print(f"lockrace: {exc}", file=sys.stderr)
            return EXIT_UNUSABLE
    loaded = None
    if scenario:
        try:
            loaded = resolve(scenario)
        except ScenarioError as exc:
            print(f"lockrace: {exc}", file=sys.stderr)
            return EXIT_UNUSABLE
        if not loaded.runs_on(engine):
            engine = loaded.engines[0]
    # The server starts in a thread while Textual is imported and the first screen drawn.
    from ..runtime.pool import start_target

    pending = {}
    executor = None
    refusal = None
    if not (targets and engine in targets):
        executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="lockrace-server")
        dsn = servers.dsn(engine)
        pending[engine] = executor.submit(start_target, engine, dsn)
        pg_dsn = (servers.dsn(Engine.POSTGRES) or os.environ.get(PG_ENV)) if engine == Engine.POSTGRES else None
        if pg_dsn:  # a hot standby cannot hold the sandbox: refused before the app opens
            refusal = executor.submit(standby_refusal, pg_dsn)
    app = None
    try:
        from .app import LockraceApp

        if refusal is not None and refusal.result() is not None:
            print(f"lockrace: {refusal.result()}", file=sys.stderr)
            return EXIT_UNUSABLE

        from .history import default_dir

        app = LockraceApp(engine=engine, scenario=loaded, targets=targets, pending=pending, servers=servers,
                          history_dir=default_dir(), colours=colours)
        app.run()
        code = app.return_code
        for text in app.farewell:
            _say(f"lockrace: {text}")
        if exitguard.app_guard is not None and exitguard.app_guard.fired:
            # ended by SIGINT, SIGTERM, SIGHUP or SIGQUIT: said and exited as ``lockrace run`` does
            _say(INTERRUPTED_LINE)
            code = EXIT_INTERRUPTED
    finally:
        if app is not None:
            app.pool.stop_owned()  # whatever way the app ended, no server is left running
        else:
            from ..runtime.races import server_pool

            server_pool(pending=pending).stop_owned()
        if executor is not None:
            executor.shutdown(wait=False)
    return code or 0
