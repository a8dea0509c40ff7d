"""``lockrace bench`` shows Rich progress bars on stderr while it works, when
stderr is a terminal (a pty here); piped, it is quiet; stdout is only the table."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from support.paths import REPO

ARGS = ["-m", "lockrace", "bench", "--runs", "2", "--modes", "nowait,skip_locked"]


def env():
    return dict(os.environ, LOCKRACE_SANDBOX="lockrace_bench_progress", COLUMNS="120", TERM="xterm-256color")


def test_progress_on_a_terminal_stdout_stays_the_table(pg_server):
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen([sys.executable, *ARGS, "--pg", pg_server.conninfo], cwd=REPO, env=env(),
                                stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL)
        os.close(slave)
        seen = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the child closed its end
                break
            if not chunk:
                break
            seen += chunk
        stdout = proc.stdout.read().decode()
        assert proc.wait(120) == 0
    finally:
        os.close(master)
    err = seen.decode(errors="replace")
    assert "holder vs waiter, 2 modes" in err and "FOR UPDATE NOWAIT" in err and "━" in err
    assert "5/5" in err  # the per-mode bar filled (3 warm-up + 2 measured runs)
    assert "Mode" in stdout and "FOR UPDATE NOWAIT" in stdout
    assert "holder vs waiter" not in stdout and "5/5" not in stdout  # no progress on stdout


def test_quiet_when_piped(pg_server):
    out = subprocess.run([sys.executable, *ARGS, "--pg", pg_server.conninfo, "--json"], cwd=REPO, env=env(),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    assert out.stdout.lstrip().startswith("{")
