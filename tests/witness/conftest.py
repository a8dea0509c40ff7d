"""Witness tests: every race is checked against what the server itself logged (marker: witness)."""

from support.markers import folder_marker

pytest_itemcollected = folder_marker("witness")
