"""The app's servers: at most one per engine, started on first use in a
thread (never on the event loop), kept alive until the app quits."""

from __future__ import annotations

import asyncio
import concurrent.futures

from ..backends import Backend, open_backend
from ..servers.target import Target, target_for

ENGINE_NAMES = {"postgres": "PostgreSQL 18", "mysql": "MariaDB/MySQL", "galera": "MariaDB Galera",
                "postgres-standby": "PostgreSQL primary + hot standby"}
STARTING = {"postgres": "embedded PostgreSQL 18", "mysql": "a private MariaDB/MySQL server",
            "galera": "a private 2-node MariaDB Galera cluster", "postgres-standby": "a private PostgreSQL primary and hot standby"}


def start_target(engine: str, dsn: str | None) -> Target:
    """Start (or point at) the server or cluster for ``engine``; blocking, so call it in a thread."""
    return target_for(engine, dsn)


class ServerPool:
    def __init__(self, dsn: dict[str, str | None] | None = None, targets: dict[str, Target] | None = None,
                 pending: dict[str, concurrent.futures.Future] | None = None):
        self.dsn = dsn or {}
        self.targets: dict[str, Target] = dict(targets or {})
        self.pending = dict(pending or {})  # servers already starting in a thread (see main.run_app)
        self.owned: set[str] = set()  # engines whose server this pool started (and must stop)
        self.backends: dict[str, Backend] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    def origin(self, engine: str) -> str:
        target = self.targets.get(engine)
        return target.origin if target else ""

    def starting_text(self, engine: str) -> str:
        if engine in self.targets or self.dsn.get(engine):
            return f"connecting to {ENGINE_NAMES[engine]}…"
        return f"starting {STARTING.get(engine, engine)}…"

    async def backend(self, engine: str) -> Backend:
        lock = self._locks.setdefault(engine, asyncio.Lock())
        async with lock:
            if engine in self.backends:
                target = self.targets[engine]
                if getattr(target, "server", None) is not None and target.server.dir is not None and not target.server.running:
                    # lockrace's own server died (killed, crashed): start it again on its data
                    await asyncio.to_thread(target.server.restart)
                return self.backends[engine]
            target = self.targets.get(engine)
            if target is None:
                future = self.pending.pop(engine, None)
                if future is not None:
                    target = await asyncio.wrap_future(future)
                else:
                    target = await asyncio.to_thread(start_target, engine, self.dsn.get(engine))
                self.targets[engine] = target
                if target.owned:
                    self.owned.add(engine)
            backend = await open_backend(target)
            self.backends[engine] = backend
            return backend

    async def close(self) -> None:
        """Leave servers as found: drop the sandbox on other people's servers, stop ours."""
        for engine, backend in list(self.backends.items()):
            target = self.targets[engine]
            if not target.owned:
                try:
                    await asyncio.wait_for(backend.drop_sandbox(), 5)
                except Exception:
                    pass
        await asyncio.to_thread(self.stop_owned)

    def stop_owned(self) -> None:
        for engine, future in list(self.pending.items()):  # started but never used: wait for it, then stop it
            try:
                target = future.result(timeout=60)
            except Exception:
                continue
            self.targets[engine] = target
            if target.owned:
                self.owned.add(engine)
        self.pending.clear()
        for engine in list(self.owned):
            try:
                self.targets[engine].stop()
            finally:
                self.owned.discard(engine)
