"""A private PostgreSQL primary + hot standby and its backend (marker: standby)."""

from support.markers import folder_marker

pytest_itemcollected = folder_marker("standby")
