"""``lockrace`` with no command: open the app."""

from __future__ import annotations

import sys

from ..scenario.errors import ScenarioError
from ..scenario.library import resolve
from ..servers.target import Target

EXIT_UNUSABLE = 2


def run_app(engine: str, scenario: str | None, pg: str | None, mysql: str | None,
            targets: dict[str, Target] | None = None) -> int:
    """Run the app until the user quits; servers it started are stopped on the way out."""
    from .app import LockraceApp

    loaded = None
    if scenario:
        try:
            loaded = resolve(scenario)
        except ScenarioError as exc:
            print(f"lockrace: {exc}", file=sys.stderr)
            return EXIT_UNUSABLE
        if loaded.kind != "scenario":
            print(f"lockrace: {scenario} is an isolation spec; run it with 'lockrace run'", file=sys.stderr)
            return EXIT_UNUSABLE
        if not loaded.runs_on(engine):
            engine = loaded.engines[0]
    app = LockraceApp(engine=engine, scenario=loaded, pg=pg, mysql=mysql, targets=targets)
    try:
        code = app.run()
    finally:
        app.pool.stop_owned()  # whatever way the app ended, no server is left running
    return code or 0
