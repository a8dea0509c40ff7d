"""Private-server housekeeping that needs no database."""

import os
import tempfile
import time
from pathlib import Path

import pytest

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


@pytest.mark.parametrize("timeout", [10.0, 0.05], ids=["stop", "exit-stop"])
def test_a_stop_while_the_start_copies_cuts_the_copy_short(tmp_path, capfd, timeout):
    """Ctrl-C during a start: the stop comes from another thread while the start
    still copies the server's template into its directory (a real ``cp -a`` of
    4,000 files here).  The stop kills the copy, removes the whole directory, and
    the start ends without spawning anything; the copy prints nothing on the
    terminal.  Also with the exit's short stop timeout (0.05 s here), which once
    removed the directory while the copy still wrote into it and left it behind."""
    import threading

    from lockrace.servers.process import PrivateServer, ServerStartError

    template = tmp_path / "template"
    template.mkdir()
    for i in range(4000):
        (template / f"f{i}").write_bytes(b"x" * 512)

    class SlowCopy(PrivateServer):
        kind = f"copytest{os.getpid()}"

        def __init__(self):
            super().__init__()
            self.copying = threading.Event()
            self.spawned = False

        def _prepare(self, workdir: Path) -> list[str]:
            data = workdir / "data"
            data.mkdir()
            self.copying.set()
            self.copy_template(template, data)
            return ["true"]

        def _spawn(self, argv):
            self.spawned = True
            raise AssertionError("spawned after a stop")

        def _ready(self) -> bool:
            return True

    server = SlowCopy()
    failures: list[BaseException] = []

    def start():
        try:
            server.start()
        except BaseException as exc:
            failures.append(exc)

    thread = threading.Thread(target=start)
    thread.start()
    assert server.copying.wait(10)
    workdir = server.dir
    time.sleep(0.01)  # the copy is under way
    server.stop(timeout)
    assert not workdir.exists(), sorted(p.name for p in workdir.rglob("*"))[:5]
    thread.join(30)
    assert not workdir.exists(), sorted(p.name for p in workdir.rglob("*"))[:5]
    assert len(failures) == 1 and isinstance(failures[0], ServerStartError), failures
    assert "stopped while it started" in str(failures[0])
    assert not server.spawned
    assert "cp:" not in capfd.readouterr().err
    with pytest.raises(ServerStartError, match="could not copy"):  # and it says why when the copy itself fails
        SlowCopy().copy_template(tmp_path / "no-such-template", tmp_path / "dest")
