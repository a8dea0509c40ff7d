"""A private MariaDB Galera cluster and its backend (marker: galera)."""

from support.markers import folder_marker

pytest_itemcollected = folder_marker("galera")
