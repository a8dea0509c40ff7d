"""The engine asks a dialect (lockrace/dialects) what differs between the servers: no
module of lockrace/engine, core, backends, lab, rehearse, locks, render or isolation
compares anything with an engine or flavor name (==, !=, in, not in; a tuple, list or
set of names counts too, and so does a member of the registry's Engine, Family or
Flavor).  The registry and the dialects are where those names belong; the app, the
scenario model (which flavor an expectation is for) and the private servers (which
binary, which way to initialise it) are not checked."""

from __future__ import annotations

import ast

import pytest
from support.paths import REPO

ROOT = REPO / "lockrace"
NAMES = {"postgres", "mysql", "mariadb", "mysql8", "galera"}
ENUMS = {"Engine", "Family", "Flavor"}  # lockrace/registry.py
PACKAGES = ("engine", "core", "backends", "lab", "rehearse", "locks", "render", "isolation")


def _modules():
    for package in PACKAGES:
        yield from sorted((ROOT / package).rglob("*.py"))


def _names_in(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value} & NAMES
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ENUMS:
        return {f"{node.value.id}.{node.attr}"}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*(_names_in(e) for e in node.elts)) if node.elts else set()
    return set()


def branches(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, name) of every comparison with an engine or flavor name."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        if not any(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops):
            continue
        for side in (node.left, *node.comparators):
            found.extend((node.lineno, name) for name in sorted(_names_in(side)))
    return found


@pytest.mark.parametrize("path", list(_modules()), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_comparison_with_an_engine_name(path):
    found = branches(ast.parse(path.read_text(), filename=str(path)))
    assert not found, "; ".join(f"{path.relative_to(ROOT)}:{line} compares with {name!r}: ask the dialect"
                                for line, name in found)


def test_the_check_finds_them():
    code = ('a == "postgres"\nif "mysql" != b: pass\nc in ("mariadb", "x")\nd not in ["galera"]\n'
            'e == "mysql8"\nf == "other"\ng = {"postgres": 1}\nh.family == Family.MYSQL\ni is Family.MYSQL\n')
    assert branches(ast.parse(code)) == [(1, "postgres"), (2, "mysql"), (3, "mariadb"), (4, "galera"),
                                         (5, "mysql8"), (8, "Family.MYSQL")]
