"""What only the MySQL family's backend and servers do: TLS, a MySQL without performance_schema (marker: mysql)."""

from support.markers import folder_marker

pytest_itemcollected = folder_marker("mysql")
