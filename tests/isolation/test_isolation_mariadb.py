"""The isolation-spec format on the MySQL family: our MariaDB specs, whose
expected outputs were checked against the live servers (MariaDB 10.11; on
MySQL 9.7.4 the same but for NOWAIT's error, kept in isolation/mysql/expected;
the lock-wait-timeout spec reads @@in_transaction, which only MariaDB has).

Waiting comes from InnoDB's lock views (lockrace's MySQLMonitor); errors print
as the mysql client does: ``ERROR 1205 (HY000): message``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.isolation import MARIADB, matches, run_to_bytes, specs_in

from lockrace.scenario.spec_format import read_spec

SPECS = specs_in(MARIADB)


def test_the_four_lessons_are_there():
    assert {p.stem for p in SPECS} >= {"mariadb-nowait", "mariadb-skip-locked", "mariadb-lock-wait-timeout",
                                        "mariadb-deadlock"}
    for spec in SPECS:
        assert read_spec(spec).engines == ["mysql"]
        assert (MARIADB / "expected" / f"{spec.stem}.out").exists()


MYSQL_EXPECTED = MARIADB.parent / "mysql" / "expected"  # where MySQL's output differs from MariaDB's


@pytest.mark.parametrize("spec", [pytest.param(p, marks=pytest.mark.mariadb_only) if p.stem == "mariadb-lock-wait-timeout"
                                  else p for p in SPECS], ids=lambda p: p.stem)
async def test_mariadb_spec_output_is_byte_identical(mysql_backend, spec: Path):
    output, completed = await run_to_bytes(spec, mysql_backend)
    where = MARIADB / "expected"
    if mysql_backend.flavor == "mysql8" and (MYSQL_EXPECTED / f"{spec.stem}.out").exists():
        where = MYSQL_EXPECTED
    ok, expected = matches(output, where, spec.stem)
    assert completed
    assert ok, f"output differs from {expected}:\n{output.decode()}"


async def test_mysql_step_timeout_kills_the_query(tmp_path, mysql_backend):
    path = tmp_path / "stuck.spec"
    path.write_text("""\
setup { CREATE TABLE t (id INT PRIMARY KEY) ENGINE=InnoDB; INSERT INTO t VALUES (1); }
teardown { DROP TABLE t; }
session s1
setup { BEGIN; }
step s1u { UPDATE t SET id = id WHERE id = 1; }
teardown { ROLLBACK; }
session s2
setup { SET SESSION innodb_lock_wait_timeout = 30; }
step s2u { UPDATE t SET id = id WHERE id = 1; }
permutation s1u s2u
""")
    output, completed = await run_to_bytes(path, mysql_backend, step_timeout=0.5)
    assert completed
    assert output.decode().endswith(
        "step s2u: UPDATE t SET id = id WHERE id = 1; <waiting ...>\n"
        "isolationtester: canceling step s2u after 0 seconds\n"
        "step s2u: <... completed>\n"
        "ERROR 1317 (70100): Query execution was interrupted\n")
