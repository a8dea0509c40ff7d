"""A first run on a bare machine: no template data directory in the cache yet.

lockrace initialises one (initdb, mariadb-install-db) before its private server
can start.  Each run here has an empty cache of its own and a TMPDIR that only
its owner may write to, as a user's private TMPDIR is: when lockrace runs as
root the server runs as 'nobody', and its initialisation must not need to
write there.
"""

from __future__ import annotations

import pytest

from support.cli import lockrace_env, processes_mentioning, run_lockrace, server_tmp  # noqa: F401


@pytest.mark.parametrize("engine,scenario", [("postgres", "pg-nowait"), ("mysql", "mysql-nowait")])
def test_a_first_run_initialises_the_private_server(engine, scenario, server_tmp, tmp_path):
    cache = tmp_path / "cache"
    env = lockrace_env(server_tmp, XDG_CACHE_HOME=str(cache))
    first = run_lockrace(["run", scenario], env, timeout=180)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "Verified against" in first.stdout, first.stdout
    made = sorted(p.name for p in (cache / "lockrace").iterdir())
    templates = [name for name in made if name.endswith("-template")]
    assert len(templates) == 1, made
    assert not [name for name in made if name.endswith(".partial")], made
    # the next run copies that template: it does not initialise again
    template = cache / "lockrace" / templates[0]
    before = template.stat().st_mtime_ns
    second = run_lockrace(["run", scenario], env, timeout=120)
    assert second.returncode == 0, second.stdout + second.stderr
    assert template.stat().st_mtime_ns == before
    assert sorted(p.name for p in server_tmp.iterdir()) == [], "temp dirs left behind"
    assert processes_mentioning(str(server_tmp)) == []
