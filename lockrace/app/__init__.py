"""The Textual app: four session panels on a real server and a wait-budget timeline.

Nothing outside this package imports it; the engine, backends, servers and
scenario packages never import Textual.
"""
