"""The race engine: sessions, the wait monitor, the scheduler, verification.

Nothing in this package (nor in core, backends, servers or scenario) imports
Textual.  The events and outcome rules it shares with the backends live
below both, in ``lockrace.core``.
"""

import sys as _sys

from ..core import events as _events, outcome as _outcome

# code written against the former locations keeps working: the same modules
_sys.modules.setdefault(__name__ + ".events", _events)
_sys.modules.setdefault(__name__ + ".outcome", _outcome)
