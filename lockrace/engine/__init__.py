"""The race engine: sessions, the wait monitor, the scheduler, verification.

Nothing in this package (nor in core, backends, servers or scenario) imports
Textual.  The events and outcome rules it shares with the backends live
below both, in ``lockrace.core``.
"""
