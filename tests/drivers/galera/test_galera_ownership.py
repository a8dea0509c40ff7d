"""Galera: a sandbox's ownership holds cluster-wide.

A run's named lock (GET_LOCK) is its node's own, while its sandbox database
(comment, DROP DATABASE) replicates.  A second lockrace given a DSN of another
node must still see that the first run is alive: it leaves its sandbox and its
sessions on every node alone.  A run that is provably gone (its lock free and
its replicated heartbeat stopped) is still swept from any node.

Uses the tests' private 2-node cluster (``galera_cluster``), given to lockrace
by DSN: for lockrace these are nodes of a cluster it did not start.
"""

from __future__ import annotations

import uuid

import pymysql
import pytest
from support.cli import lockrace_env, run_lockrace

from lockrace.backends import open_backend
from lockrace.backends.sandbox import HEARTBEAT_TABLE
from lockrace.servers.cluster import cluster_target
from lockrace.servers.target import mysql_target


def _dsn(cluster, node: str) -> str:
    return f"mysql://root@localhost/?unix_socket={cluster.nodes[node].mysql_kwargs['unix_socket']}"


def _sql(cluster, node: str, sql: str, args=()):
    conn = pymysql.connect(**cluster.nodes[node].mysql_kwargs, database=None, autocommit=True)
    try:
        cur = conn.cursor()
        cur.execute(sql, args)
        return list(cur.fetchall()) if cur.description else []
    finally:
        conn.close()


def _exists(cluster, node: str, name: str) -> bool:
    return bool(_sql(cluster, node, "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s", (name,)))


async def test_second_run_on_node2_leaves_a_live_first_run_alone(galera_cluster, monkeypatch):
    """Before: the second lockrace (--mysql at node2) found the first run's named lock
    free on node2, killed its node2 session and dropped its sandbox cluster-wide."""
    sandbox = f"lockrace_g1_{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("LOCKRACE_SANDBOX", sandbox)
    dsns = ",".join(_dsn(galera_cluster, n) for n in ("node1", "node2"))
    first = await open_backend(cluster_target("galera", dsns))
    sessions = {}
    try:
        await first.run_admin(["CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL)",
                               "INSERT INTO accounts VALUES (1, 100)"])
        for name, node in (("A", "node1"), ("C", "node2")):
            sessions[name] = await first.nodes[node].connect_session(name)
        res = await sessions["C"].execute("BEGIN")
        res = await sessions["C"].execute("SELECT balance FROM accounts WHERE id = 1 FOR UPDATE")
        assert res.rows == [("100",)], res.message

        # a second lockrace, pointed at node2 only; a third one even reuses the first one's name
        out = run_lockrace(["run", "mysql-nowait", "--mysql", _dsn(galera_cluster, "node2")], lockrace_env(), 120)
        assert out.returncode == 0, out.stdout + out.stderr
        same = run_lockrace(["run", "mysql-nowait", "--mysql", _dsn(galera_cluster, "node2")],
                            lockrace_env(LOCKRACE_SANDBOX=sandbox), 120)
        assert same.returncode == 2, same.stdout + same.stderr
        assert "is the sandbox of another lockrace process that is still running" in same.stderr, same.stderr

        for node in ("node1", "node2"):
            assert _exists(galera_cluster, node, sandbox), f"the live run's sandbox is gone on {node}"
        for name in ("A", "C"):  # the first run's sessions on both nodes are still connected and usable
            res = await sessions[name].execute("SELECT balance FROM accounts WHERE id = 1")
            assert (res.outcome, res.rows) == ("ok", [("100",)]), (name, res.message)
        assert (await sessions["C"].execute("COMMIT")).outcome == "ok"
    finally:
        for session in sessions.values():
            await session.close()
        await first.drop_sandbox()
    assert not _exists(galera_cluster, "node1", sandbox)


async def test_a_gone_run_is_swept_from_another_node(galera_cluster, monkeypatch):
    """The first run on node1 dies (its lock is released, its heartbeat stops and is old):
    a lockrace on node2 ends its node2 connections and drops its sandbox."""
    sandbox = f"lockrace_g2_{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("LOCKRACE_SANDBOX", sandbox)
    dead = await open_backend(mysql_target(_dsn(galera_cluster, "node1")))
    try:
        assert dead.galera and dead.heartbeat is not None
        leftover = pymysql.connect(**galera_cluster.nodes["node2"].mysql_kwargs, database=sandbox, autocommit=True)
        dead.heartbeat.stop()  # the run dies: no more beats, its lock goes with its owner connection
        dead.owner.close()
        _sql(galera_cluster, "node1", f"UPDATE `{sandbox}`.`{HEARTBEAT_TABLE}` SET at = at - INTERVAL 1 HOUR")
        monkeypatch.delenv("LOCKRACE_SANDBOX")
        later = await open_backend(mysql_target(_dsn(galera_cluster, "node2")))
        await later.drop_sandbox()
        for node in ("node1", "node2"):
            assert not _exists(galera_cluster, node, sandbox), f"the gone run's sandbox is still on {node}"
        with pytest.raises(pymysql.err.OperationalError):
            leftover.cursor().execute("SELECT 1")  # the gone run's node2 connection was ended
    finally:
        _sql(galera_cluster, "node1", f"DROP DATABASE IF EXISTS `{sandbox}`")
