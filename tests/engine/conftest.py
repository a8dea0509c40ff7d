"""The engine on real servers: races, budgets, outcomes, verdicts, the built-in scenarios, lockrace locks, bench and rehearse, on PostgreSQL and the MySQL family alike (marker: engine)."""

from support.markers import folder_marker

pytest_itemcollected = folder_marker("engine")
