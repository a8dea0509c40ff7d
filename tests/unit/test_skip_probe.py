"""The read that counts a SKIP LOCKED statement's passed-over rows: repeated only where
repeating it can change nothing and count right."""

import pytest

from lockrace.backends.base import NoProbe, skip_probe


@pytest.mark.parametrize("sql, probe, limit", [
    ("SELECT id FROM jobs ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED", "SELECT id FROM jobs ORDER BY id", 1),
    ("SELECT id FROM jobs ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 2;", "SELECT id FROM jobs ORDER BY id", 2),
    ("SELECT id FROM jobs ORDER BY id FETCH FIRST 1 ROWS ONLY FOR UPDATE SKIP LOCKED",
     "SELECT id FROM jobs ORDER BY id", 1),
    ("SELECT * FROM jobs WHERE id IN (SELECT id FROM q LIMIT 5) FOR NO KEY UPDATE OF jobs SKIP LOCKED",
     "SELECT * FROM jobs WHERE id IN (SELECT id FROM q LIMIT 5)", None),
    # MariaDB's shared form takes SKIP LOCKED too
    ("SELECT id FROM jobs ORDER BY id LIMIT 2 LOCK IN SHARE MODE SKIP LOCKED", "SELECT id FROM jobs ORDER BY id", 2),
])
def test_probe(sql, probe, limit):
    got, got_limit, table = skip_probe(sql)
    assert (got, got_limit, table) == (probe, limit, "jobs")


@pytest.mark.parametrize("sql, why", [
    ("SELECT claim(id), nextval('tickets') FROM jobs ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED", "function"),
    ("SELECT id, clock_timestamp() FROM jobs FOR UPDATE SKIP LOCKED", "function"),
    ("SELECT id FROM jobs LIMIT ALL FOR UPDATE SKIP LOCKED", "LIMIT"),
    ("SELECT id FROM jobs LIMIT 1+1 FOR UPDATE SKIP LOCKED", "LIMIT"),
    ("SELECT id FROM jobs LIMIT 1 OFFSET 1 FOR UPDATE SKIP LOCKED", "OFFSET"),
    ("SELECT id FROM jobs FOR UPDATE SKIP LOCKED; SELECT 1", "single"),
    ("SELECT id FROM jobs /* FOR UPDATE SKIP LOCKED */", "SKIP LOCKED"),
    ("SELECT id FROM jobs LOCK IN SHARE MODE NOWAIT", "SKIP LOCKED"),
])
def test_no_probe(sql, why):
    with pytest.raises(NoProbe, match=why):
        skip_probe(sql)


def test_mysql_functions_are_not_repeated():
    for sql in ("SELECT id, RAND() FROM jobs FOR UPDATE SKIP LOCKED", "SELECT UUID() FROM jobs FOR UPDATE SKIP LOCKED",
                "SELECT NEXT VALUE FOR s FROM jobs FOR UPDATE SKIP LOCKED"):
        with pytest.raises(NoProbe, match="function"):
            skip_probe(sql, "mysql")
