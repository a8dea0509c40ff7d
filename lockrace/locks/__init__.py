"""Every client's locks on a whole server, read-only: who waits for whom, on what.

``lockrace locks`` and the app's lock view read a server's own lock views into a
``Snapshot`` (``model.py``): every client session, and every wait as an edge from
the waiter to what blocks it, told apart as a wait for a *holder* or a place
*queued* behind another waiter's pending request.  The readers (``pg.py``,
``mysql.py``) run on a connection of their own, bounded by the server's statement
time limit, and never lock anyone's objects; ``text.py`` draws the wait-for forest
and ``jsonout.py`` gives it as JSON.  Nothing here imports Textual.
"""

from .model import Client, Snapshot, Wait

__all__ = ["Client", "Snapshot", "Wait"]
