"""Run several ``lockrace`` command lines in one Python process (saves the
interpreter start per case in the fault tests).

    python tests/support/run_many.py CASES.json  ->  JSON list of {code, stdout, stderr}

CASES.json is a list of {"argv": [...], "env": {...}}.  Each case runs
``lockrace.cli.main(argv)`` with its own environment overrides; anything that
escapes main() is caught and written to that case's stderr as a traceback,
exactly what a user would have seen.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from lockrace.cli import main  # noqa: E402


def run_case(argv: list[str], env: dict) -> dict:
    saved = dict(os.environ)
    os.environ.update(env)
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except BaseException:  # what would have reached the user's terminal
                traceback.print_exc()
                code = 1
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return {"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}


if __name__ == "__main__":
    cases = json.loads(Path(sys.argv[1]).read_text())
    results = [run_case(c["argv"], c.get("env", {})) for c in cases]
    sys.stdout.write(json.dumps(results))
