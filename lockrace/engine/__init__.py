"""The race engine: sessions, the wait monitor, outcomes, the scenario runner.

Nothing in this package (nor in backends, servers or scenario) imports Textual.
"""
