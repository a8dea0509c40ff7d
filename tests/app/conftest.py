"""The Textual app, driven headless or in a real terminal (marker: app)."""

from support.markers import folder_marker

pytest_itemcollected = folder_marker("app")
