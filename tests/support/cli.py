"""Run ``python -m lockrace`` as a real subprocess for the fault tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from support.paths import REPO
from support.waits import eventually
from support.scenarios import accounts_setup



def lockrace_env(tmpdir: Path | None = None, **extra: str) -> dict:
    # (LOCKRACE_MYSQLD stays: it chooses which private server the tests run on)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOCKRACE_") or k == "LOCKRACE_MYSQLD"}
    env["PYTHONPATH"] = str(REPO)
    env["PYTHONUNBUFFERED"] = "1"
    if tmpdir is not None:
        env["TMPDIR"] = str(tmpdir)  # the private servers' temp dirs land here
    env.update(extra)
    return env


def run_lockrace(args: list[str], env: dict, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lockrace", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


class LiveRun:
    """A ``lockrace`` subprocess whose output is collected as it comes."""

    def __init__(self, args: list[str], env: dict):
        self.proc = subprocess.Popen([sys.executable, "-m", "lockrace", *args], cwd=REPO, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.out: list[str] = []
        self.err: list[str] = []
        self._threads = [threading.Thread(target=self._pump, args=(self.proc.stdout, self.out), daemon=True),
                         threading.Thread(target=self._pump, args=(self.proc.stderr, self.err), daemon=True)]
        for t in self._threads:
            t.start()

    @staticmethod
    def _pump(stream, sink: list[str]) -> None:
        for line in stream:
            sink.append(line)

    def wait_for_line(self, needle: str, timeout: float) -> bool:
        def seen():  # True: printed; False: the process ended without it; None: not yet
            if any(needle in line for line in self.out):
                return True
            return False if self.proc.poll() is not None else None

        return bool(eventually(seen, lambda found: found is not None, timeout=timeout, every=0.02, fail=False))

    def finish(self, timeout: float) -> int:
        code = self.proc.wait(timeout)
        for t in self._threads:
            t.join(5)
        return code

    @property
    def stdout(self) -> str:
        return "".join(self.out)

    @property
    def stderr(self) -> str:
        return "".join(self.err)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)


def processes_mentioning(text: str) -> list[str]:
    """Command lines of running processes that contain ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(f"{entry.name}: {cmdline.strip()}")
    return found


SLEEP = {"postgres": "SELECT pg_sleep(60);", "mysql": "SELECT SLEEP(60);"}


def blocking_scenario(engine: str) -> str:
    """A scenario that ends with B, C and D waiting for A's row while A sleeps."""
    return f"""title: three sessions blocked, a fourth sleeping
engines: {engine}
setup:
{accounts_setup(100)}
A> BEGIN;
A> UPDATE accounts SET balance = 1 WHERE id = 1;
B> UPDATE accounts SET balance = 2 WHERE id = 1;
    completes-after: 7
C> UPDATE accounts SET balance = 3 WHERE id = 1;
    completes-after: 7
D> UPDATE accounts SET balance = 4 WHERE id = 1;
    completes-after: 7
A> {SLEEP[engine]}
A> COMMIT;
"""


@pytest.fixture
def server_tmp():
    """A TMPDIR for one run: the private servers run as 'nobody' when the tests
    run as root, so it must be reachable by them (pytest's tmp_path is not)."""
    path = Path(tempfile.mkdtemp(prefix="fault-tmp-"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)
