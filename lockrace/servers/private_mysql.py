"""A private MariaDB (or MySQL) instance: the server ``LOCKRACE_MYSQLD`` names,
or else ``mariadbd`` / ``mysqld`` on PATH.

Which of the two it is comes from the server's ``--version``; a MariaDB data
directory is made with mariadb-install-db (mysql_install_db), a MySQL 8+ one
with ``mysqld --initialize-insecure``.

Initialised once into a cached template, then copied into a temp dir for each
run; it listens on a Unix socket only (no TCP port; ``PrivateMySQL(tcp=True)``
adds a free loopback port, where a MySQL server offers TLS with the
certificates it made itself), with root and an empty password, and is stopped
and removed on exit.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path

import pymysql

from .process import (
    PrivateServer,
    ServerStartError,
    cache_dir,
    install_template,
    make_staging,
    template_lock,
)

_SEARCH = ("/usr/sbin", "/usr/local/sbin", "/usr/local/mysql/bin", "/usr/libexec")

NO_SERVER_MESSAGE = (
    "no MariaDB/MySQL server available: install one so that 'mariadbd' or 'mysqld' is on PATH"
    " (for example: apt-get install mariadb-server), or point lockrace at a running server with"
    " --mysql mysql://user@host:port or LOCKRACE_MYSQL_DSN"
)


SERVER_ENV = "LOCKRACE_MYSQLD"


def _flavor_of(binary: Path) -> str:
    """'mariadb' or 'mysql', from what the server says of itself."""
    try:
        out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ServerStartError(f"{SERVER_ENV}={binary} does not run: {exc}") from None
    text = out.stdout + out.stderr
    if out.returncode != 0 or "Ver" not in text.split():
        raise ServerStartError(f"{SERVER_ENV}={binary} is not a MariaDB or MySQL server (its --version said:"
                               f" {(text.strip().splitlines() or ['nothing'])[0]})")
    return "mariadb" if "mariadb" in text.lower() else "mysql"


def find_server_binary(needs: str | None = None) -> tuple[str, Path]:
    """('mariadb'|'mysql', path) of the server binary, or ServerStartError.  ``needs``
    "mariadb" (Galera): a MySQL server that LOCKRACE_MYSQLD names is passed over."""
    chosen = os.environ.get(SERVER_ENV)
    if chosen:
        binary = Path(chosen)
        if not binary.is_file() or not os.access(binary, os.X_OK):
            raise ServerStartError(f"{SERVER_ENV}={chosen} is not an executable file")
        flavor = _flavor_of(binary)
        if needs is None or flavor == needs:
            return flavor, binary
    path = os.environ.get("PATH", "")
    search = os.pathsep.join([path, *_SEARCH])
    for name, flavor in (("mariadbd", "mariadb"), ("mysqld", "mysql")):
        found = shutil.which(name, path=search)
        if found:
            resolved = Path(found).resolve()
            # On Debian mysqld is a link to mariadbd
            if flavor == "mysql" and "mariadb" in resolved.name:
                flavor = "mariadb"
            return flavor, Path(found)
    raise ServerStartError(NO_SERVER_MESSAGE)


def _version(binary: Path) -> str:
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30)
    words = out.stdout.split()
    return words[words.index("Ver") + 1] if "Ver" in words else "unknown"


class PrivateMySQL(PrivateServer):
    kind = "mysql"
    needs: str | None = None  # a flavor this server must be (find_server_binary)

    def __init__(self, tcp: bool = False) -> None:
        super().__init__()
        self.flavor, self.binary = find_server_binary(self.needs)
        self.port: int | None = None
        if tcp:
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                self.port = probe.getsockname()[1]

    @property
    def socket(self) -> Path:
        assert self.dir is not None
        return self.dir / "mysqld.sock"

    def connect_kwargs(self) -> dict:
        # No TLS over a private Unix socket: PyMySQL's default ("preferred") builds a fresh
        # SSL context on every connect, ~50 ms of CPU, which made every race slow to open.
        if self.port:  # on the loopback port: TLS when the server offers it, as any client would
            return {"host": "127.0.0.1", "port": self.port, "user": "root", "password": ""}
        return {"unix_socket": str(self.socket), "user": "root", "password": "", "ssl_disabled": True}

    def _plugin_dir(self) -> Path | None:
        for candidate in ("/usr/lib/mysql/plugin", "/usr/lib64/mysql/plugin", "/usr/local/mysql/lib/plugin"):
            if Path(candidate).is_dir():
                return Path(candidate)
        return None

    def _template(self) -> Path:
        version = _version(self.binary).replace("/", "_")
        template = cache_dir() / f"{self.flavor}-{version}-template"
        if self.template_ready(template, "mysql"):
            return template
        with template_lock(template, self._check_cancelled):
            if self.template_ready(template, "mysql"):
                return template
            # the installer runs as the server's user (run_helper), in a directory
            # of that user's: no --user, nothing for it to chown
            staging = make_staging(self.user)
            data = staging / "data"
            if self.flavor == "mariadb":
                near = os.pathsep.join([str(self.binary.parent), str(self.binary.parent.parent / "bin"),
                                        os.environ.get("PATH", "")])
                installer = shutil.which("mariadb-install-db", path=near) or shutil.which("mysql_install_db", path=near)
                if not installer:
                    raise ServerStartError("mariadbd is installed but mariadb-install-db is not; cannot initialise a private MariaDB")
                argv = [installer, "--no-defaults", f"--datadir={data}", "--auth-root-authentication-method=normal",
                        "--skip-test-db", "--skip-name-resolve"]
            else:
                argv = [str(self.binary), "--no-defaults", "--initialize-insecure", f"--datadir={data}"]
            try:
                # its temp files in the staging dir: when lockrace runs as root the server
                # user may not write to $TMPDIR (InnoDB then aborts the bootstrap)
                code, output = self.run_helper(argv, env={**os.environ, "TMPDIR": str(staging)})
                if code != 0:
                    lines = output.strip().splitlines()
                    tail = [line for line in lines if "[ERROR]" in line][:1] or lines[-1:] or ["no output"]
                    raise ServerStartError(f"initialising the private {self.flavor} data directory failed: {tail[0]}")
                install_template(data, template, self)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
        return template

    def _prepare(self, workdir: Path) -> list[str]:
        data = workdir / "data"
        self.make_dir(data, 0o700)
        self.copy_template(self._template(), data)
        return self._argv(workdir)

    def _argv(self, workdir: Path) -> list[str]:
        argv = [
            str(self.binary), "--no-defaults", f"--datadir={workdir / 'data'}", f"--socket={self.socket}",
            *(["--bind-address=127.0.0.1", f"--port={self.port}"] if self.port else ["--skip-networking"]),
            f"--pid-file={workdir / 'mysqld.pid'}", f"--log-error={workdir / 'server.err'}",
            # temp files in the server's own dir (removed on stop), not in $TMPDIR,
            # which the unprivileged server user may not be able to write
            f"--tmpdir={workdir}",
            "--innodb-buffer-pool-size=32M", "--innodb-flush-log-at-trx-commit=0", "--skip-log-bin",
            "--max-connections=200", "--lc-messages=en_US",
        ]
        if self.user is not None:
            argv.append(f"--user={self.user.pw_name}")
        plugins = self._plugin_dir()
        if self.flavor == "mariadb" and plugins and (plugins / "metadata_lock_info.so").exists():
            # lets the monitor name who holds a metadata lock (ALTER TABLE waits)
            argv += [f"--plugin-dir={plugins}", "--plugin-load-add=metadata_lock_info"]
        if self.flavor == "mysql":
            # file import/export only in the server's own dir; no X Protocol listener
            argv += ["--performance-schema=ON", f"--secure-file-priv={workdir}", "--mysqlx=OFF"]
        return argv

    def log_tail(self, lines: int = 3) -> str:
        err = self.dir / "server.err" if self.dir else None
        if err and err.exists():
            text = err.read_text(errors="replace").strip().splitlines()
            errors = [line for line in text if "ERROR" in line] or text
            return " | ".join(line.strip() for line in errors[-lines:])
        return super().log_tail(lines)

    def _ready(self) -> bool:
        if not self.socket.exists():
            return False
        try:
            conn = pymysql.connect(**self.connect_kwargs(), connect_timeout=2)
            conn.close()
            return True
        except pymysql.err.OperationalError:
            return False
