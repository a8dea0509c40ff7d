"""The servers of one lockrace process: at most one server (or cluster) per
engine, started on first use in a thread (never on the event loop), kept
until the process is done with them.  ``lockrace run``, ``lockrace bench``,
isolation specs and the app all use this one pool.

A target is registered the moment it exists, even when the run was
interrupted meanwhile, so a server that finished starting after Ctrl-C is
stopped all the same (``stop_now`` from the exit guard, from any thread).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from typing import Callable

from ..backends import Backend, ConnectError, open_backend
from ..registry import engine as engine_spec
from ..servers.process import ServerStartError
from ..servers.choose import target_for
from ..servers.cluster import Cluster
from ..servers.target import DsnError, Target



class ServerUnavailable(Exception):
    """The server could not be started or reached: one clear sentence."""


def start_target(engine: str, dsn: str | None) -> Target | Cluster:
    """Start (or point at) the server or cluster for ``engine``; blocking, so call it in a thread."""
    return target_for(engine, dsn)


class ServerPool:
    def __init__(self, dsn: dict[str, str | None] | None = None, targets: dict[str, Target | Cluster] | None = None,
                 pending: dict[str, concurrent.futures.Future] | None = None,
                 say: Callable[[str], None] | None = None):
        """``dsn``: a DSN per engine (None: a private server); ``targets``: servers already
        given; ``pending``: servers already starting in a thread; ``say``: where sentences
        about the clean-up go (the CLI prints them on stderr)."""
        self.dsn = dsn or {}
        self.targets: dict[str, Target | Cluster] = dict(targets or {})
        self.given = set(self.targets)  # handed in by the caller: the caller stops them
        self.pending = dict(pending or {})
        self.backends: dict[str, Backend] = {}
        self.say = say or (lambda text: None)
        self._locks: dict[str, asyncio.Lock] = {}

    def origin(self, engine: str) -> str:
        target = self.targets.get(engine)
        return target.origin if target else ""

    def starting_text(self, engine: str) -> str:
        spec = engine_spec(engine)
        if engine in self.targets or self.dsn.get(engine):
            return f"connecting to {spec.label}…"
        return f"starting {spec.private}…"

    async def backend(self, engine: str) -> Backend:
        """The backend for ``engine``, starting or reaching its server first if needed."""
        lock = self._locks.setdefault(engine, asyncio.Lock())
        async with lock:
            try:
                return await self._backend(engine)
            except (ServerStartError, DsnError, ConnectError) as exc:
                raise ServerUnavailable(str(exc)) from None

    async def _backend(self, engine: str) -> Backend:
        if engine in self.backends:
            server = getattr(self.targets[engine], "server", None)
            if server is not None and server.dir is not None and not server.running:
                # lockrace's own server died (killed, crashed): start it again on its data
                await asyncio.to_thread(server.restart)
            return self.backends[engine]
        if engine not in self.targets:
            future = self.pending.pop(engine, None)
            if future is not None:
                self.targets[engine] = await asyncio.wrap_future(future)
            else:
                dsn = self.dsn.get(engine)

                def start() -> Target | Cluster:
                    target = start_target(engine, dsn)
                    self.targets[engine] = target  # at once: an interrupt meanwhile still stops it
                    return target

                await asyncio.to_thread(start)
        self.backends[engine] = await open_backend(self.targets[engine])
        return self.backends[engine]

    def _owned(self) -> list[Target | Cluster]:
        return [t for e, t in self.targets.items() if e not in self.given and t.owned]

    async def close(self, quick: bool = False) -> None:
        """Leave servers as found: drop the sandbox on servers lockrace did not start,
        stop the ones it did (``quick``: interrupted, every step within moments)."""
        for engine, backend in list(self.backends.items()):
            if self.targets[engine].owned:
                continue
            try:
                await asyncio.wait_for(backend.drop_sandbox(), 0.5 if quick else backend.admin_timeout + 5)
            except asyncio.TimeoutError:
                self.say(f"the sandbox {self.targets[engine].sandbox} could not be dropped in time"
                         f"{' (interrupted)' if quick else ''}; the next run removes it")
            except Exception as exc:  # bounded: a foreign lock in the sandbox ends it with a clear sentence
                self.say(str(exc))
        await asyncio.to_thread(self.stop_owned, 0.5 if quick else 10.0)

    def stop_now(self) -> None:
        """From any thread, when lockrace must end at once: stop its servers within moments."""
        for target in self._owned():
            with contextlib.suppress(Exception):
                target.stop(0.2)

    def stop_owned(self, timeout: float = 10.0) -> None:
        """Blocking: stop every server this pool started, including one still starting."""
        for engine, future in list(self.pending.items()):  # started but never used: wait for it, then stop it
            try:
                self.targets[engine] = future.result(timeout=60)
            except Exception:
                continue
        self.pending.clear()
        for target in self._owned():
            target.stop(timeout)
