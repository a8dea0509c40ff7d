"""Private-server housekeeping that needs no database."""

import os
import tempfile
import time
from pathlib import Path

from lockrace.servers.process import sweep_stale


def _make(name: str, age_s: float, pid: int | None = None) -> Path:
    path = Path(tempfile.gettempdir()) / name
    (path / "data").mkdir(parents=True, exist_ok=True)
    if pid is not None:
        (path / "data" / "postmaster.pid").write_text(f"{pid}\n/some/dir\n")
    old = time.time() - age_s
    os.utime(path, (old, old))
    return path


def test_sweep_removes_only_dead_old_server_dirs():
    kind = f"sweeptest{os.getpid()}"
    dead = _make(f"lockrace-{kind}-dead", 600)
    alive = _make(f"lockrace-{kind}-alive", 600, pid=os.getpid())  # a live process owns it
    young = _make(f"lockrace-{kind}-young", 5)  # may be a server still starting
    try:
        sweep_stale(kind)
        assert not dead.exists()
        assert alive.exists() and young.exists()
    finally:
        for p in (dead, alive, young):
            if p.exists():
                import shutil

                shutil.rmtree(p)
