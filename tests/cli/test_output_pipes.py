"""lockrace run writing into a pipe whose reader is gone (``| head -1``): no
BrokenPipeError traceback, exit 141, and no private server left behind."""

from __future__ import annotations

import os

import pytest
from support.cli import server_tmp  # noqa: F401  (fixture)


@pytest.mark.parametrize("fmt", ["transcript", "json"])
def test_closed_stdout_ends_quietly(fmt, server_tmp):
    """``lockrace run ... | head -1`` where the reader is already gone: no
    BrokenPipeError traceback, exit 141 (128 + SIGPIPE, as a shell reports a
    writer whose reader left), and the run still cleans up after itself."""
    import subprocess
    import sys

    from support.cli import REPO as ROOT
    from support.cli import lockrace_env, processes_mentioning

    read_end, write_end = os.pipe()
    os.close(read_end)  # every write to stdout now fails with EPIPE
    try:
        out = subprocess.run([sys.executable, "-m", "lockrace", "run", "pg-nowait", "--format", fmt], cwd=ROOT,
                             env=lockrace_env(server_tmp), stdout=write_end, stderr=subprocess.PIPE, text=True,
                             timeout=120)
    finally:
        os.close(write_end)
    assert out.stderr == "" and out.returncode == 141, (out.returncode, out.stderr)
    assert sorted(p.name for p in server_tmp.iterdir()) == [], "private server temp dir left behind"
    assert processes_mentioning(str(server_tmp)) == [], "server processes left behind"


def test_piped_into_head(server_tmp):
    """The real pipeline, as a user types it."""
    import shlex
    import subprocess
    import sys

    from support.cli import REPO as ROOT
    from support.cli import lockrace_env

    command = (f"{shlex.quote(sys.executable)} -m lockrace run pg-nowait pg-lock-timeout | head -1; "
               'echo "lockrace exited ${PIPESTATUS[0]}" >&2')
    out = subprocess.run(["bash", "-c", command], cwd=ROOT, env=lockrace_env(server_tmp), capture_output=True,
                         text=True, timeout=120)
    assert out.stdout.startswith("== pg-nowait: ") and out.stdout.count("\n") == 1, out.stdout
    assert out.stderr.strip() in ("lockrace exited 141", "lockrace exited 0"), out.stderr
