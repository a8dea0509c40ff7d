"""The one registry of engines, topologies and flavors (lockrace/registry.py): every engine is
fully described, and the command line, the scenario readers, the server starters and the
cluster hooks all take their list from it.  No server needed."""

from __future__ import annotations

import argparse
import json

import pytest

from lockrace import registry
from lockrace.backends import CLUSTER_HOOKS
from lockrace.cli import build_parser
from lockrace.registry import ENGINES, TOPOLOGIES, Engine, Family, Flavor, TopologyName
from lockrace.runtime.options import ServerChoice
from lockrace.runtime.pool import ServerPool
from lockrace.scenario.errors import ScenarioError
from lockrace.scenario.spec_format import parse_spec
from lockrace.scenario.text_format import parse_scenario as parse_text
from lockrace.servers.choose import SINGLE, STARTERS


def test_every_engine_is_fully_described():
    assert list(ENGINES) == list(Engine)
    flags, envs = set(), set()
    for name, spec in ENGINES.items():
        assert spec.name is name
        assert spec.label and spec.private
        assert spec.family in Family
        assert spec.topology in TOPOLOGIES
        assert spec.flavors and all(f in Flavor and f != Flavor.MYSQL for f in spec.flavors)
        assert spec.flag.startswith("--") and spec.env.startswith("LOCKRACE_")
        flags.add(spec.flag)
        envs.add(spec.env)
    assert len(flags) == len(ENGINES) == len(envs)  # one flag, one variable each


def test_single_server_is_a_topology_like_the_others():
    assert ENGINES[Engine.POSTGRES].topology is TopologyName.SINGLE
    assert not TOPOLOGIES[TopologyName.SINGLE].cluster
    assert registry.topology_of("postgres") is TOPOLOGIES[TopologyName.SINGLE]
    assert registry.topology_of("galera").nodes == ("node1", "node2")
    assert set(registry.CLUSTER_NODES) == {"galera", "postgres-standby"}
    assert registry.SINGLE_ENGINES == ("postgres", "mysql")
    assert registry.CLUSTER_ENGINES == ("galera", "postgres-standby")


def test_names_equal_their_strings():
    assert Engine.POSTGRES_STANDBY == "postgres-standby" and Flavor.MYSQL8 == "mysql8"
    assert json.dumps([Engine.GALERA, Flavor.MARIADB]) == '["galera", "mariadb"]'
    assert registry.engine("galera").family is Family.MYSQL
    with pytest.raises(ValueError):
        registry.engine("oracle")


def test_every_engine_can_be_started_and_every_cluster_has_its_hooks():
    assert set(SINGLE) | set(STARTERS) == set(Engine)
    assert set(SINGLE) == set(registry.SINGLE_ENGINES)
    assert set(CLUSTER_HOOKS) == {t for t, topo in TOPOLOGIES.items() if topo.cluster}


def _choices(parser: argparse.ArgumentParser, command: str | None, dest: str):
    if command is not None:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[command]
    return tuple(next(a for a in parser._actions if a.dest == dest).choices)


def test_command_line_choices_come_from_the_registry():
    parser = build_parser()
    for command in (None, "run", "locks"):
        assert _choices(parser, command, "engine") == registry.ENGINE_NAMES
    for command in ("bench", "rehearse"):
        assert _choices(parser, command, "engine") == registry.SINGLE_ENGINES
    assert _choices(parser, "bench", "cluster") == registry.CLUSTER_ENGINES
    args = parser.parse_args(["run", "x", "--pg", "p", "--galera", "g1,g2"])
    servers = ServerChoice.from_flags(args)
    assert servers.dsns == {"postgres": "p", "mysql": None, "galera": "g1,g2", "postgres-standby": None}
    assert servers.given() == ["postgres", "galera"]


def _race(engines: str) -> str:
    return f"title: t\nengines: {engines}\n\nA> SELECT 1;\n"


def test_scenario_reader_accepts_exactly_the_registry_engines():
    for name in registry.ENGINE_NAMES:
        assert parse_text(_race(name)).engines == [name]
    with pytest.raises(ScenarioError) as caught:
        parse_text(_race("oracle"))
    assert ", ".join(registry.ENGINE_NAMES) in str(caught.value)


def test_spec_reader_accepts_the_single_server_engines():
    spec = 'session s1\nstep a { SELECT 1; }\n'
    for name in registry.SINGLE_ENGINES:
        assert parse_spec(f"# engines: {name}\n{spec}").engines == [name]
    for name in registry.CLUSTER_ENGINES:
        with pytest.raises(ScenarioError):
            parse_spec(f"# engines: {name}\n{spec}")


def test_pool_says_what_it_starts_in_the_registry_words():
    pool = ServerPool({"mysql": "mysql://root@127.0.0.1:1"})
    assert pool.starting_text("galera") == f"starting {ENGINES[Engine.GALERA].private}…"
    assert pool.starting_text("mysql") == f"connecting to {ENGINES[Engine.MYSQL].label}…"


def test_private_server_dirs_are_the_server_classes_kinds():
    from lockrace.servers.embedded_postgres import EmbeddedPostgres
    from lockrace.servers.galera import GaleraNode
    from lockrace.servers.pg_standby import PrimaryPostgres, StandbyPostgres
    from lockrace.servers.private_mysql import PrivateMySQL

    assert ENGINES[Engine.POSTGRES].dirs == (EmbeddedPostgres.kind,)
    assert ENGINES[Engine.MYSQL].dirs == (PrivateMySQL.kind,)
    assert ENGINES[Engine.GALERA].dirs == (GaleraNode.kind,)
    assert ENGINES[Engine.POSTGRES_STANDBY].dirs == (PrimaryPostgres.kind, StandbyPostgres.kind)
