"""Shared plumbing for the private servers lockrace starts itself.

A private server lives in its own temporary directory (data, socket, log),
runs as an unprivileged user when lockrace runs as root (PostgreSQL refuses to
run as root), is stopped on exit, and its directory is removed.  A template
data directory, initialised once, is kept in the user's cache so that later
starts only copy it.

When lockrace runs as root, everything in a server's directory is made by the
server's user: lockrace creates the directory, gives that one directory (by a
file descriptor, never following a link) to the user, and from then on runs
whatever fills it (mkdir, cp, initdb, mariadb-install-db, pg_basebackup) as
that user.  Nothing walks a tree the server's user can write and changes
owners in it: that user could swap a link in and have root give away a
directory elsewhere.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import ctypes
import functools
import os
import pwd
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

_live: list["PrivateServer"] = []


class ServerStartError(Exception):
    """A private server could not be started: one clear sentence."""


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "lockrace"


def run_user() -> pwd.struct_passwd | None:
    """The user a private server runs as: ourselves, or 'nobody' when we are root."""
    if os.geteuid() != 0:
        return None
    for name in ("nobody",):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise ServerStartError("running as root but there is no 'nobody' user to run a private server as")


def as_user(user: pwd.struct_passwd | None) -> dict:
    """Popen keywords that run a program as ``user`` (and no supplementary group
    of ours: root's groups would otherwise go along)."""
    if user is None:
        return {}
    return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}


def hand_over(path: Path, user: pwd.struct_passwd | None) -> None:
    """Give ``path``, a directory lockrace has just created, to ``user``.

    One directory, not a tree, changed through a descriptor opened without
    following a link, and only if it is still lockrace's own.
    """
    if user is None:
        return
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid():
            raise ServerStartError(f"{path} is not a directory lockrace made: it is not handed to {user.pw_name}")
        os.fchown(fd, user.pw_uid, user.pw_gid)
    finally:
        os.close(fd)


def die_with_parent(sig: int) -> None:  # pragma: no cover - runs in the child
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, int(sig))  # PR_SET_PDEATHSIG
    except OSError:
        pass


_launcher: concurrent.futures.ThreadPoolExecutor | None = None
_launcher_lock = threading.Lock()


def _launch(fn):
    """Run ``fn`` (a Popen) on one thread that lives as long as lockrace.

    The server is tied to lockrace's life with PR_SET_PDEATHSIG, which fires
    when the *thread* that forked it exits: forking from short-lived worker
    threads would stop the server early, so every server is forked from this
    one thread, whichever thread asked.  If lockrace is killed outright the
    server gets its ``death_signal``, a shutdown that does not wait for running
    statements or connected clients (the data is scratch); its directory is
    swept at the next start (sweep_stale).
    """
    global _launcher
    with _launcher_lock:
        if _launcher is None:
            _launcher = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="lockrace-launcher")
    return _launcher.submit(fn).result()


def pid_alive(pid_file: Path) -> bool:
    try:
        pid = int(pid_file.read_text().split()[0])
        os.kill(pid, 0)
    except (OSError, ValueError, IndexError):
        return False
    try:  # a server killed with lockrace may stay a zombie until init reaps it: that is dead
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def sweep_stale(kind: str, min_age_s: float = 60.0) -> None:
    """Remove temp dirs of earlier private servers whose process is gone
    (lockrace killed with SIGKILL, a machine crash).  A dir younger than a
    minute may belong to a server that is still starting, and is left alone.
    """
    now = time.time()
    for path in Path(tempfile.gettempdir()).glob(f"lockrace-{kind}-*"):
        try:
            if not path.is_dir() or now - path.stat().st_mtime < min_age_s:
                continue
        except OSError:
            continue
        pid_files = [path / "data" / "postmaster.pid", path / "mysqld.pid"]
        if any(pid_alive(f) for f in pid_files if f.exists()):
            continue
        shutil.rmtree(path, ignore_errors=True)


class PrivateServer:
    """A server process lockrace owns: started in a temp dir, stopped on exit."""

    kind = "server"
    stop_signal = signal.SIGTERM
    death_signal = signal.SIGKILL  # sent by the kernel when lockrace dies (PR_SET_PDEATHSIG)

    def __init__(self) -> None:
        self.dir: Path | None = None
        self.proc: subprocess.Popen | None = None
        self.user = run_user()
        self.log_path: Path | None = None
        self._stopping = threading.Lock()
        self._starting = threading.Lock()  # held from filling the directory until the process exists
        self._cancelled = False  # a stop came while it started
        self._helper: subprocess.Popen | None = None  # cp or initdb filling a directory, if one runs
        self._helper_lock = threading.Lock()
        self._log_fd: int | None = None  # server.log, opened before the directory is handed over

    # subclasses fill these in
    def _prepare(self, workdir: Path) -> list[str]:
        raise NotImplementedError

    def _ready(self) -> bool:
        raise NotImplementedError

    def start(self, timeout: float = 30.0) -> None:
        sweep_stale(self.kind)
        self.dir = Path(tempfile.mkdtemp(prefix=f"lockrace-{self.kind}-"))
        _live.append(self)  # from now on stop_all() removes it, even half-started
        self._cancelled = False
        try:
            with self._starting:
                self._open_log(self.dir / "server.log")  # while the directory is lockrace's alone
                hand_over(self.dir, self.user)
                argv = self._prepare(self.dir)
                self._check_cancelled()  # a stop waits for this lock: it removes the directory next
                self.proc = self._spawn(argv)
            deadline = time.monotonic() + timeout
            while not self._ready():
                if self.proc.poll() is not None:
                    raise ServerStartError(
                        f"the private {self.kind} server exited at start (code {self.proc.returncode}):"
                        f" {self.log_tail()}"
                    )
                if time.monotonic() > deadline:
                    raise ServerStartError(f"the private {self.kind} server did not start within {timeout:.0f} s: {self.log_tail()}")
                time.sleep(0.01)
        except BaseException:
            self.stop()
            raise

    def _check_cancelled(self) -> None:
        if self._cancelled:
            raise ServerStartError(f"the private {self.kind} server was stopped while it started")

    def run_helper(self, argv: list[str], **popen: Any) -> tuple[int, str]:
        """Run a program that fills a directory for the start (cp, initdb) as
        the server's user and return its exit code and output.  A stop kills
        it, with everything it started, so that the directory can be removed at
        once instead of under a copy still writing into it."""
        with self._helper_lock:
            self._check_cancelled()
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, start_new_session=True, **as_user(self.user), **popen)
            self._helper = proc
        try:
            output, _ = proc.communicate()
        finally:
            with self._helper_lock:
                self._helper = None
        self._check_cancelled()
        return proc.returncode, output

    def _must(self, argv: list[str], what: str, **popen: object) -> None:
        code, output = self.run_helper(argv, **popen)
        if code != 0:
            last = output.strip().splitlines()[-1:] or [f"exit code {code}"]
            raise ServerStartError(f"{what}: {last[0]}")

    def make_dir(self, path: Path, mode: int = 0o700) -> None:
        """Create a directory in the server's directory, owned by the server's user."""
        if self.user is None:
            path.mkdir(mode=mode)
            return
        self._must(["mkdir", "-m", f"{mode:o}", "--", str(path)], f"could not create {path}")

    def append_text(self, path: Path, text: str) -> None:
        """Append ``text`` to a file of the server's, as the server's user."""
        if self.user is None:
            with open(path, "a") as fh:
                fh.write(text)
            return
        self._must(["sh", "-c", 'printf %s "$1" >> "$2"', "sh", text, str(path)], f"could not write {path}")

    def copy_template(self, template: Path, dest: Path) -> None:
        """Copy a template data directory into ``dest`` as the server's user,
        so that every file is born with the right owner.  The template lives in
        lockrace's cache, which that user may not reach (root's home): the copy
        is given the template as an open directory instead of its path."""
        what = f"could not copy the server's template into {dest}"
        if self.user is None:
            self._must(["cp", "-a", f"{template}/.", str(dest)], what)
            return
        try:
            fd = os.open(template, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            raise ServerStartError(f"{what}: {exc.strerror}: {template}") from None
        try:
            self._must(["cp", "-a", f"/proc/self/fd/{fd}/.", str(dest)], what, pass_fds=(fd,))
        finally:
            os.close(fd)

    def template_ready(self, template: Path, marker: str) -> bool:
        """Whether ``template`` is a complete template this server's user can copy
        (a template made as another user, by an older lockrace, is made again)."""
        if not (template / marker).exists():
            return False
        if self.user is None:
            return True
        try:
            st = os.lstat(template)
        except OSError:
            return False
        return stat.S_ISDIR(st.st_mode) and st.st_uid == self.user.pw_uid

    def _open_log(self, path: Path) -> None:
        self.log_path = path
        self._log_fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                               0o644)

    def _close_log(self) -> None:
        fd, self._log_fd = self._log_fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def _log_text(self) -> str:
        """The server's log, read through lockrace's own descriptor."""
        fd = self._log_fd
        if fd is None:
            return ""
        size = os.fstat(fd).st_size
        start = max(0, size - 65536)
        return os.pread(fd, size - start, start).decode(errors="replace")

    def log_tail(self, lines: int = 3) -> str:
        try:
            text = self._log_text()
        except OSError:
            return ""
        return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:])

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server (its stop signal, then SIGKILL to its whole process
        group after ``timeout`` s: a frozen or wedged server cannot hold lockrace)."""
        if not self._stopping.acquire(timeout=timeout):
            # another thread is stopping it and it has not stopped within our own
            # deadline (the exit watchdog while a polite stop waits): kill it, then
            # let that stop finish (its wait returns, it removes the directory)
            proc = self.proc
            if proc is not None and proc.poll() is None:
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGKILL)
            if not self._stopping.acquire(timeout=5):
                return
        try:
            self._stop(timeout)
        finally:
            self._stopping.release()

    def _stop(self, timeout: float) -> None:
        # A start still filling the directory or launching the process (Ctrl-C during
        # the first start, from another thread) gets there first: removing the tree
        # under its copy would leave the copy's errors on the terminal and files behind.
        with self._helper_lock:
            self._cancelled = True
            helper = self._helper
        if helper is not None and helper.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(helper.pid, signal.SIGKILL)
        started = self._starting.acquire(timeout=timeout)
        if not started and helper is not None:
            # the start ends within moments of its helper's death: let it, rather than
            # removing the directory under its feet (a short stop timeout on exit)
            started = self._starting.acquire(timeout=2.0)
        try:
            self._stop_started(timeout)
        finally:
            if started:
                self._starting.release()

    def _stop_started(self, timeout: float) -> None:
        proc = self.proc
        if proc is not None and proc.poll() is None:
            try:
                proc.send_signal(self.stop_signal)
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGKILL)  # its own session: the group is the server's
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=5)
            except ProcessLookupError:
                pass
        if self.proc is proc:
            self.proc = None
        with contextlib.suppress(ValueError):
            _live.remove(self)
        self._close_log()
        workdir, self.dir = self.dir, None
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)

    def kill(self) -> None:
        """Kill the server abruptly (fault tests: 'the server dies mid-race')."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=5)

    def restart(self) -> None:
        """Start again on the same data directory after a stop or crash."""
        assert self.dir is not None, "restart needs the data directory of an earlier start"
        if self.running:
            self.kill()
        self.proc = self._spawn(self._argv(self.dir))
        if self not in _live:
            _live.append(self)
        deadline = time.monotonic() + 30
        while not self._ready():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise ServerStartError(f"the private {self.kind} server did not restart: {self.log_tail()}")
            time.sleep(0.01)

    def _argv(self, workdir: Path) -> list[str]:
        raise NotImplementedError

    def _spawn(self, argv: list[str]) -> subprocess.Popen:
        """Start the server process from the launcher thread (see _launch)."""
        assert self._log_fd is not None

        def launch() -> subprocess.Popen:
            # the log is lockrace's descriptor: never reopened by its path in a
            # directory the server's user owns
            return subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=self._log_fd,
                stderr=subprocess.STDOUT,
                preexec_fn=functools.partial(die_with_parent, self.death_signal),
                start_new_session=True,  # a Ctrl-C in the terminal reaches lockrace, not the server
                **as_user(self.user),
            )

        return _launch(launch)


def template_lock(path: Path, check=None):
    """An exclusive lock while a template data directory is being made (another
    lockrace may be making it).  ``check`` runs while waiting and may raise."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    fh = open(path.with_suffix(".lock"), "w")
    while True:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fh
        except BlockingIOError:
            if check is not None:
                try:
                    check()
                except BaseException:
                    fh.close()
                    raise
            time.sleep(0.05)


def make_staging(user: pwd.struct_passwd | None) -> Path:
    """A fresh directory, owned by ``user``, to initialise a template in (as ``user``).

    It lives in the temp dir, not in the cache: when lockrace runs as root the
    cache is under /root, which the unprivileged server user cannot enter.
    """
    staging = Path(tempfile.mkdtemp(prefix="lockrace-init-"))
    try:
        hand_over(staging, user)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return staging


def install_template(staging: Path, template: Path, server: "PrivateServer | None" = None) -> None:
    """Move an initialised data directory into the cache as the template.

    For a server run as another user, the directory is renamed into the cache
    (the same file system) or copied there by that user, never copied by
    lockrace: the template stays that user's, file by file.
    """
    partial = template.with_name(template.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.rmtree(template, ignore_errors=True)  # one that is not usable any more
    user = server.user if server is not None else None
    if server is None or user is None:
        shutil.move(str(staging), str(partial))
    elif os.stat(staging.parent).st_dev == os.stat(template.parent).st_dev:
        os.rename(staging, partial)
        st = os.lstat(partial)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != user.pw_uid:
            shutil.rmtree(partial, ignore_errors=True)
            raise ServerStartError(f"the initialised data directory {staging} was replaced: not used as a template")
    else:
        os.mkdir(partial, 0o700)
        hand_over(partial, user)
        fd = os.open(partial, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            server._must(["cp", "-a", f"{staging}/.", f"/proc/self/fd/{fd}/."],
                         f"could not copy the initialised data directory into {partial}", pass_fds=(fd,))
        finally:
            os.close(fd)
    partial.rename(template)


def stop_all(timeout: float = 10.0) -> None:
    """Stop every private server this process started (each within ``timeout`` s)."""
    for server in list(_live):
        with contextlib.suppress(Exception):
            server.stop(timeout)


@atexit.register
def _stop_all() -> None:
    stop_all()
