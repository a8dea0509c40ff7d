"""lockrace as a user runs it: a real subprocess, its exit codes, messages, signals and the servers it leaves behind (marker: cli)."""

from support.markers import folder_marker

pytest_itemcollected = folder_marker("cli")
