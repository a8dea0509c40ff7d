"""Types and rules shared by the engine and the backends, below both: events
and statement results (``events``), how a server's answer becomes an outcome
and which budget a statement runs under (``outcome``).

Imports nothing else from lockrace; backends and engine import this, never
each other's upward (the engine uses backends, backends never use the engine).
"""
