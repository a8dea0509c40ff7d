"""Fault matrix 8: soak, short version of bench/soak.py.

Many scenario runs in a row in this one process on each engine; after a
warm-up, the connections lockrace holds on the server (the server's own
count), this process's threads, file descriptors and resident memory must not
grow beyond noise.  ``python bench/soak.py`` runs 200 per engine and prints
the figures.
"""

from __future__ import annotations

import importlib.util
import sys

import pytest
from support.paths import REPO

_spec = importlib.util.spec_from_file_location("lockrace_bench_soak", REPO / "bench" / "soak.py")
soak_module = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = soak_module  # its dataclasses look themselves up there
_spec.loader.exec_module(soak_module)

RUNS = {"postgres": 20, "mysql": 12}
RSS_NOISE_KIB = 6 * 1024  # allocator and import noise; a leak of one Race per run would be far more


@pytest.mark.parametrize("engine", ["postgres", "mysql"])
async def test_soak_no_growth(engine, pg_server, mysql_server):
    target = pg_server if engine == "postgres" else mysql_server
    result = await soak_module.soak(target, RUNS[engine])
    soak_module.print_table(result)  # shown with pytest -s
    assert result["failures"] == []
    start, middle, end = result["samples"]
    assert [s["server_connections"] for s in (start, middle, end)] == [0, 0, 0]
    assert end["threads"] <= start["threads"] + 1, result
    assert end["os_threads"] <= start["os_threads"] + 1, result
    assert end["fds"] <= start["fds"] + 2, result
    assert end["rss_kib"] - start["rss_kib"] < RSS_NOISE_KIB, result
    # no steady climb in the second half either
    assert end["fds"] <= middle["fds"] + 1 and end["os_threads"] <= middle["os_threads"] + 1, result
