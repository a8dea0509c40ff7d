"""Cycles of a wait-for graph, shared by the race's lock view (engine/lock_graph.py) and
``lockrace locks`` (locks/model.py): an edge (a, b) says a waits for b."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any, TypeVar

Node = TypeVar("Node", bound=Hashable)


def find_cycles(edges: Iterable[tuple[Node, Node]]) -> list[tuple[Node, ...]]:
    """Every elementary cycle of a small wait-for graph, each once, starting at its
    smallest member: ('A', 'B') for A waits for B waits for A."""
    graph: dict[Any, list[Any]] = {}
    for a, b in edges:
        targets = graph.setdefault(a, [])
        if b not in targets:
            targets.append(b)
    out: list[tuple[Node, ...]] = []

    def walk(path: list[Any]) -> None:
        for nxt in graph.get(path[-1], ()):
            if nxt == path[0]:
                out.append(tuple(path))
            elif nxt > path[0] and nxt not in path:  # each cycle found from its smallest member only
                walk(path + [nxt])

    for start in sorted(graph):
        walk([start])
    return out


def cycle_text(cycle: tuple[Any, ...] | list[Any]) -> str:
    """'A → B → A'."""
    return " → ".join(str(n) for n in [*cycle, cycle[0]])
