"""The lock-view queries live as .sql files per server, read through importlib.resources
(so they ship inside the package), and the monitors send exactly those texts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lockrace.backends.queries import query
from support.paths import REPO

SQL = REPO / "lockrace" / "dialects" / "sql"
CODE = [REPO / "lockrace" / "backends", REPO / "lockrace" / "locks"]  # the monitors and the lock view
FILES = sorted(SQL.rglob("*.sql"))


def test_the_query_files_are_where_the_dialects_read_them():
    assert {p.parent.name for p in FILES} == {"postgres", "mariadb", "mysql8"}


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_query_file_is_documented_and_used(path: Path):
    text = path.read_text()
    assert text.startswith("-- "), "each query says what it reads"
    body = query(path.parent.name, path.stem)
    assert body.lstrip().upper().startswith("SELECT") and "--" not in body.splitlines()[0]
    name = re.sub(r"_post_\d+$", "", path.stem)  # a variant for servers from that version on
    used = any(re.search(rf'query\(\s*"{path.parent.name}",.*"{path.stem}"', p.read_text())
               or re.search(rf'\.lock_view\(\s*"{name}"', p.read_text())
               for folder in CODE for p in folder.glob("*.py"))
    assert used, f"{path.relative_to(SQL)} is read by no backend"


async def test_postgres_monitor_sends_the_file_text(pg_backend):
    monitor = await pg_backend.connect_monitor()
    try:
        assert monitor._waits_sql == query("postgres", "waits_post_140000")
        assert await monitor.waits([monitor.ident]) == {}  # runs as is on the server
    finally:
        await monitor.close()
