"""The isolationtester-compatible runner on real servers (marker: isolation); its specs and expected outputs live in tests/isolation/upstream, mariadb and mysql."""

from support.markers import folder_marker

pytest_itemcollected = folder_marker("isolation")
