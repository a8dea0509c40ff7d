"""Private-server housekeeping that needs no database."""

import os
import shutil
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
            self.make_dir(data)
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


def _owner(path: Path) -> tuple[int, int, int]:
    st = os.lstat(path)
    return st.st_uid, st.st_gid, st.st_mode


@pytest.mark.skipif(os.geteuid() != 0, reason="the private servers run as another user only when lockrace runs as root")
@pytest.mark.parametrize("attack", ["link", "vanish"])
def test_the_server_user_cannot_make_root_give_away_a_directory(tmp_path, attack):
    """Running as root, lockrace gives the server's directory to an unprivileged
    user.  That user (any process of it) can write there while lockrace still
    prepares the directory: here it swaps each directory it may write in for a
    link to a root-owned directory elsewhere ('link'), or files vanish from the
    tree, as a server's socket and pid files do ('vanish'), at every moment
    lockrace checks for a stop.  The root-owned directory keeps its owner and
    mode, on the start and on a restart; the start either works or fails with
    one sentence, never with a FileNotFoundError; the server runs as that user
    with none of root's groups."""
    from lockrace.servers.process import PrivateServer, ServerStartError

    victim = Path(tempfile.mkdtemp(prefix="lockrace-victim-"))
    (victim / "secret").write_text("root's\n")
    (victim / "f0").write_text("root's too\n")
    before = {p: _owner(p) for p in (victim, victim / "secret", victim / "f0")}

    template = tmp_path / "template"
    for sub in ("a", "b", "a/deeper"):
        (template / sub).mkdir(parents=True)
    for i in range(20):
        (template / f"f{i}").write_text("x")
        (template / f"vanish{i}").write_text("x")
        (template / "a" / f"vanish{i}").write_text("x")
    (template / "link").symlink_to(victim)  # a link in the template itself is copied as a link

    class Planted(PrivateServer):
        kind = f"linktest{os.getpid()}"

        def _prepare(self, workdir: Path) -> list[str]:
            data = workdir / "data"
            self.make_dir(data)
            self.copy_template(template, data)
            return self._argv(workdir)

        def _argv(self, workdir: Path) -> list[str]:
            return ["sleep", "60"]

        def _ready(self) -> bool:
            return True

        def _check_cancelled(self) -> None:
            super()._check_cancelled()
            plant(self)

    def plant(server: PrivateServer) -> None:
        """What the server's user does in the tree while lockrace prepares it."""
        if server.dir is None or not server.dir.is_dir():
            return
        for parent, dirs, files in os.walk(server.dir):
            if attack == "vanish":  # one file at each moment
                gone = [name for name in files if name.startswith("vanish")][:1]
                if gone:
                    Path(parent, gone[0]).unlink()
                    return
            elif os.lstat(parent).st_uid == server.user.pw_uid:  # it may write in this one
                for name in dirs:
                    path = Path(parent, name)
                    if not path.is_symlink() and not name.endswith(".moved"):
                        path.rename(Path(parent, name + ".moved"))
                        path.symlink_to(victim)

    server = Planted()
    assert server.user is not None and server.user.pw_uid != 0
    try:
        failed: BaseException | None = None
        try:
            server.start()
        except Exception as exc:
            failed = exc
        assert {p: _owner(p) for p in before} == before
        if attack == "link":  # the copy found a link where its directory was: refused, as that user
            assert isinstance(failed, ServerStartError), repr(failed)
        else:
            assert failed is None, repr(failed)
        if attack == "vanish":
            assert server.running
            status = Path(f"/proc/{server.proc.pid}/status").read_text()
            uids = next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1:]
            groups = next(line for line in status.splitlines() if line.startswith("Groups:")).split()[1:]
            assert set(uids) == {str(server.user.pw_uid)}
            assert groups == [], f"the server kept root's groups: {groups}"
            data = server.dir / "data"
            assert {_owner(p)[0] for p in data.rglob("*") if not p.is_symlink()} == {server.user.pw_uid}
            # the user plants links everywhere it can, lockrace restarts the server
            for name in ("server.log", "evil", "data/a"):
                target = server.dir / name
                if target.is_dir() and not target.is_symlink():
                    shutil.rmtree(target)
                else:
                    target.unlink(missing_ok=True)
                target.symlink_to(victim if name != "server.log" else victim / "secret")
            server.kill()
            server.restart()
            assert server.running
            assert {p: _owner(p) for p in before} == before
            assert (victim / "secret").read_text() == "root's\n"
    finally:
        server.stop()
        shutil.rmtree(victim)
    assert {p for p in before if p.exists()} == set()
