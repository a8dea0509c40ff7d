"""The cluster framework without servers: .race topology headers, placement,
and the pure outcome classifiers for cluster failures (the live behaviour is
verified on a real Galera cluster in test_galera.py)."""

import pytest

from lockrace.core.outcome import galera_conflict
from lockrace.dialects.postgres import classify_postgres
from lockrace.scenario.errors import ScenarioError
from lockrace.scenario.model import default_node
from lockrace.scenario.text_format import parse_scenario, write_scenario
from lockrace.servers.cluster import cluster_target
from lockrace.servers.target import DsnError

GALERA = """\
title: two nodes
engines: galera
nodes: A=node1 C=node2 B=node2
A> BEGIN;
C> BEGIN;
B> SELECT 1;
D> SELECT 1;
"""


def test_nodes_header_places_sessions_and_round_trips():
    sc = parse_scenario(GALERA)
    assert sc.engines == ["galera"]
    assert sc.nodes == {"A": "node1", "C": "node2", "B": "node2"}
    assert sc.placement("galera") == {"A": "node1", "C": "node2", "B": "node2", "D": "node2"}
    again = parse_scenario(write_scenario(sc))
    assert again.nodes == sc.nodes and again.engines == ["galera"]


def test_default_placement_is_a_b_on_the_first_node_c_d_on_the_second():
    sc = parse_scenario("engines: galera\nA> SELECT 1;\nB> SELECT 1;\nC> SELECT 1;\nD> SELECT 1;\n")
    assert sc.placement("galera") == {"A": "node1", "B": "node1", "C": "node2", "D": "node2"}
    assert [default_node("postgres-standby", n, 0) for n in "ABCD"] == ["primary", "primary", "standby", "standby"]


@pytest.mark.parametrize("text, message", [
    ("engines: galera\nnodes: A=node3\nA> SELECT 1;\n", "galera has no node 'node3'"),
    ("engines: postgres\nnodes: A=node1\nA> SELECT 1;\n", "applies to cluster engines"),
    ("engines: galera\nnodes: A:node1\nA> SELECT 1;\n", "SESSION=NODE"),
    ("engines: galera\nnodes: Z=node1\nA> SELECT 1;\n", "no session named Z"),
    ("engines: galera\nnodes: A=node1 A=node2\nA> SELECT 1;\n", "placed twice"),
])
def test_bad_nodes_headers_name_the_line(text, message):
    with pytest.raises(ScenarioError) as err:
        parse_scenario(text, path="x.race")
    assert message in str(err.value) and "x.race:2" in str(err.value)


def test_galera_1213_is_told_apart_by_the_node_counters():
    zero = {"wsrep_local_cert_failures": 0, "wsrep_local_bf_aborts": 0}
    assert galera_conflict(1213, zero, zero) is None  # an ordinary InnoDB deadlock
    assert galera_conflict(1213, zero, {**zero, "wsrep_local_cert_failures": 1, "wsrep_local_bf_aborts": 1}) \
        == "certification failure"
    assert galera_conflict(1213, zero, {**zero, "wsrep_local_bf_aborts": 1}) == "brute-force abort"
    assert galera_conflict(1205, zero, {**zero, "wsrep_local_bf_aborts": 1}) is None


def test_recovery_conflict_is_its_own_outcome():
    msg = "canceling statement due to conflict with recovery"
    assert classify_postgres("40001", msg, "SELECT 1") == "recovery_conflict"
    assert classify_postgres("40001", "could not serialize access due to concurrent update", "SELECT 1") == "error"


def test_cluster_dsns_need_one_per_node_and_hide_passwords():
    with pytest.raises(DsnError) as err:
        cluster_target("galera", "mysql://root:s3cret@127.0.0.1:3306")
    assert "needs 2 DSNs" in str(err.value) and "s3cret" not in str(err.value)
    cluster = cluster_target("galera", "mysql://root@127.0.0.1:4001,mysql://root@127.0.0.1:4002")
    assert list(cluster.nodes) == ["node1", "node2"] and not cluster.owned
    assert cluster.nodes["node2"].mysql_kwargs["port"] == 4002
