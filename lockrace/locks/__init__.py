"""Every client's locks on a whole server, read-only: who waits for whom, on what.

``lockrace locks`` and the app's lock view read a server's own lock views into a
``Snapshot`` (``model.py``): every client session, and every wait as an edge from
the waiter to what blocks it, told apart as a wait for a *holder* or a place
*queued* behind another waiter's pending request.  The readers (``pg.py``,
``mysql.py``) run on a connection of their own, bounded by the server's statement
time limit, and never lock anyone's objects; ``text.py`` draws the wait-for forest
and ``jsonout.py`` gives it as JSON.  Nothing here imports Textual.

The app reads a race's server the same way, in a worker thread (the readers block)::

    source = Source.from_target(target)
    conn = await asyncio.to_thread(source.connect)
    snap = await asyncio.to_thread(source.read, conn)
    snap.name(session_names(race))   # its sessions by letter, every other client by pid
"""

from .model import Client, Snapshot, Wait
from .sources import Source


def session_names(race) -> dict[int, str]:
    """A race's sessions by backend ident (pid / thread id) -> letter, for ``Snapshot.name``
    (single servers; on a cluster, per node: idents are per server)."""
    return {s.ident: s.name for s in race.sessions.values() if s.ident}


__all__ = ["Client", "Snapshot", "Source", "Wait", "session_names"]
