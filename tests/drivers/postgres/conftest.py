"""What only PostgreSQL's backend and servers do (marker: postgres)."""

from support.markers import folder_marker

pytest_itemcollected = folder_marker("postgres")
