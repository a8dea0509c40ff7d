"""A private 2-node MariaDB Galera cluster: two ``mariadbd`` processes with the
galera-4 provider, on loopback, each in its own temp dir.

node1 starts from lockrace's cached MariaDB template with
``--wsrep-new-cluster``; node2 starts with an empty data directory and
receives a full copy from node1 by rsync (SST).  Every port (client, group
communication, IST, SST) is a free loopback port picked at start.  When
lockrace runs as root the nodes run as ``nobody``, who owns their data dirs:
the rsync SST script runs as the server's user.  Both nodes are stopped (node2
first) and their dirs removed on exit, on signals, or if the start fails.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pymysql

from ..registry import TopologyName
from .cluster import Cluster
from .private_mysql import PrivateMySQL
from .process import ServerStartError
from .target import Target

PROVIDER_ENV = "LOCKRACE_GALERA_PROVIDER"
_PROVIDERS = (
    "/usr/lib/galera/libgalera_smm.so",
    "/usr/lib/libgalera_smm.so",
    "/usr/lib64/galera-4/libgalera_smm.so",
    "/usr/lib64/galera/libgalera_smm.so",
    "/usr/lib/x86_64-linux-gnu/galera/libgalera_smm.so",
)
NODES = ("node1", "node2")
CAUSAL_READ_TIMEOUT_S = 5
NO_PROVIDER = ("no Galera provider (libgalera_smm.so) on this machine: install galera-4"
               " (apt-get install galera-4 rsync), set LOCKRACE_GALERA_PROVIDER to its path,"
               " or point lockrace at a running cluster with --galera DSN1,DSN2")


def find_provider() -> Path:
    wanted = os.environ.get(PROVIDER_ENV)
    if wanted:  # given: that one or nothing
        if Path(wanted).is_file():
            return Path(wanted)
        raise ServerStartError(f"{PROVIDER_ENV}={wanted}: no such file (the Galera provider, libgalera_smm.so)")
    for candidate in _PROVIDERS:
        if Path(candidate).exists():
            return Path(candidate)
    raise ServerStartError(NO_PROVIDER)


def free_ports(count: int) -> list[int]:
    """``count`` distinct free loopback ports (held open together while picking)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class GaleraNode(PrivateMySQL):
    """One node: a private mariadbd with wsrep on, ready once it is Synced."""

    kind = "galera"
    needs = "mariadb"  # (a MySQL server in LOCKRACE_MYSQLD is not for Galera)

    def __init__(self, name: str, provider: Path, ports: dict[str, int], peers: list[str], bootstrap: bool):
        super().__init__()
        if self.flavor != "mariadb":
            raise ServerStartError("Galera needs MariaDB's mariadbd (found a MySQL server)")
        self.name = name
        self.provider = provider
        self.ports = ports
        self.peers = peers
        self.bootstrap = bootstrap

    def _prepare(self, workdir: Path) -> list[str]:
        data = workdir / "data"
        self.make_dir(data, 0o700)
        if self.bootstrap:
            self.copy_template(self._template(), data)
        # a joiner starts empty and gets node1's data by rsync (SST)
        return self._argv(workdir)

    def _argv(self, workdir: Path) -> list[str]:
        base = [a for a in super()._argv(workdir) if a not in ("--skip-networking", "--skip-log-bin")]
        p = self.ports
        options = ";".join([
            f"gmcast.listen_addr=tcp://127.0.0.1:{p['gcomm']}",
            f"ist.recv_addr=127.0.0.1:{p['ist']}",
            "gcache.size=16M",  # the default 128M file is slow to create and never needed here
            "pc.recovery=FALSE",
            "evs.suspect_timeout=PT3S", "evs.inactive_timeout=PT5S",  # a dead peer is noticed in seconds
            # A read waiting under wsrep_sync_wait ignores KILL QUERY and KILL CONNECTION (measured):
            # only catching up or this timeout ends it.  30 s by default; 5 s keeps every
            # statement on lockrace's own cluster stoppable within seconds.
            f"repl.causal_read_timeout=PT{CAUSAL_READ_TIMEOUT_S}S",
        ])
        argv = base + [
            "--bind-address=127.0.0.1", f"--port={p['mysql']}",
            "--wsrep-on=ON", f"--wsrep-provider={self.provider}", f"--wsrep-provider-options={options}",
            "--wsrep-cluster-name=lockrace", f"--wsrep-node-name={self.name}",
            f"--wsrep-node-address=127.0.0.1:{p['gcomm']}",
            f"--wsrep-sst-receive-address=127.0.0.1:{p['sst']}",
            "--wsrep-sst-method=rsync",
            f"--wsrep-cluster-address=gcomm://{','.join(self.peers)}",
            "--binlog-format=ROW", "--innodb-autoinc-lock-mode=2", "--default-storage-engine=InnoDB",
        ]
        if self.bootstrap:
            argv.append("--wsrep-new-cluster")
        return argv

    def _ready(self) -> bool:
        if not self.socket.exists():
            return False
        try:
            conn = pymysql.connect(**self.connect_kwargs(), connect_timeout=2)
        except pymysql.err.OperationalError:
            return False
        try:
            cur = conn.cursor()
            cur.execute("SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_ready', 'wsrep_local_state_comment')")
            status = dict(cur.fetchall())
            return status.get("wsrep_ready") == "ON" and status.get("wsrep_local_state_comment") == "Synced"
        except pymysql.MySQLError:
            return False
        finally:
            conn.close()

    def restart(self) -> None:
        raise ServerStartError("a Galera node is not restarted in place; reset the app to start a new cluster")


def start_galera(timeout: float = 120.0) -> Cluster:
    """Start node1 (a new cluster), then node2 (joins by SST); blocking."""
    provider = find_provider()
    if not any(Path(d, "rsync").exists() for d in os.environ.get("PATH", "").split(os.pathsep) + ["/usr/bin"]):
        raise ServerStartError("Galera's rsync SST needs rsync: apt-get install rsync")
    ports = free_ports(4 * len(NODES))
    plan = {name: dict(zip(("mysql", "gcomm", "ist", "sst"), ports[4 * i: 4 * i + 4])) for i, name in enumerate(NODES)}
    started: list[GaleraNode] = []
    t0 = time.perf_counter()
    try:
        for i, name in enumerate(NODES):
            peers = [] if i == 0 else [f"127.0.0.1:{plan[n]['gcomm']}" for n in NODES[:i]]
            node = GaleraNode(name, provider, plan[name], peers, bootstrap=(i == 0))
            started.append(node)
            node.start(timeout=timeout)
    except BaseException:
        for node in reversed(started):
            node.stop()
        raise
    startup = time.perf_counter() - t0
    nodes = {n.name: Target("mysql", "private", mysql_kwargs=n.connect_kwargs(), server=n) for n in started}
    return Cluster(
        TopologyName.GALERA, "private", nodes, stoppers=[n.stop for n in reversed(started)], startup_s=startup,
        details={"provider": str(provider), "sst": "rsync", "user": started[0].user.pw_name if started[0].user else "",
                 **{f"{n.name} ports": ", ".join(f"{k} {v}" for k, v in n.ports.items()) for n in started}},
    )
