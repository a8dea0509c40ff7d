"""Each test folder's marker: tests/FOLDER/conftest.py calls ``folder_marker("NAME")``."""

from __future__ import annotations

import pytest


def folder_marker(name: str):
    """A pytest_itemcollected hook that gives every test of the folder the marker ``name``
    (pytest calls a conftest's collection hooks only for the tests under its folder)."""
    mark = getattr(pytest.mark, name)

    def pytest_itemcollected(item) -> None:
        item.add_marker(mark)

    return pytest_itemcollected
