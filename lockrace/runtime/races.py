"""One way to put a race together: the server pool, the backend of an engine, the race on it
with its sessions seated on their nodes.  ``lockrace run``, the app and the tests all use it."""

from __future__ import annotations

from typing import Callable

from ..backends.base import Backend
from ..engine.race import Race
from ..registry import topology_of
from ..scenario.model import Scenario
from ..servers.cluster import Cluster
from ..servers.target import Target
from .options import ServerChoice
from .pool import ServerPool


def server_pool(servers: ServerChoice | None = None, targets: dict[str, Target | Cluster] | None = None,
                pending: dict | None = None, say: Callable[[str], None] | None = None) -> ServerPool:
    """The pool of one lockrace process: the DSNs chosen, servers already given or starting."""
    return ServerPool(dict((servers or ServerChoice()).dsns), targets, pending, say=say)


def new_race(backend: Backend, scenario: Scenario, names: list[str] | None = None) -> tuple[Race, dict[str, str]]:
    """A race (not opened yet) on ``backend`` for ``scenario``'s sessions (or ``names``), and
    where each session sits: session -> node on a cluster, {} on a single server."""
    names = list(names) if names is not None else scenario.session_names()
    if not topology_of(backend.topology).cluster:
        return Race(backend, names), {}
    race = Race(backend, names, placement=scenario.placement(backend.topology, names))
    return race, {name: race.node_for(name) for name in names}
