"""Isolation specs on the embedded PostgreSQL 18: byte-identical with upstream.

PostgreSQL's own specs, vendored in tests/isolation/upstream, must print
exactly upstream's expected output.  The
behaviour tests below pin isolationtester's rules (notice prefixes and
counting, blocker annotations, NOTIFY lines, setup failure, step timeout) on
small specs of our own.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.isolation import REFERENCE_SPECS, UPSTREAM, matches, run_to_bytes, specs_in

from lockrace.scenario.spec_format import parse_spec

def test_upstream_folder_carries_every_spec_and_its_output():
    names = {p.stem for p in specs_in(UPSTREAM)}
    assert set(REFERENCE_SPECS) <= names and len(names) == 19
    for name in names:
        assert (UPSTREAM / "expected" / f"{name}.out").is_file(), name
    assert "PostgreSQL Global Development Group" in (UPSTREAM / "LICENSE").read_text()


@pytest.mark.parametrize("spec", specs_in(UPSTREAM), ids=lambda p: p.stem)
async def test_upstream_spec_is_byte_identical(pg_backend, spec: Path):
    output, completed = await run_to_bytes(spec, pg_backend)
    ok, expected = matches(output, UPSTREAM / "expected", spec.stem)
    assert completed
    assert ok, f"output differs from {expected}:\n{output.decode()}"


async def _run_text(tmp_path: Path, backend, text: str, name: str = "t", step_timeout: float = 30.0):
    path = tmp_path / f"{name}.spec"
    path.write_text(text)
    return await run_to_bytes(path, backend, step_timeout)


NOTICES = """\
setup { CREATE TABLE t (a int); }
teardown { DROP TABLE t; }

session s1
setup { BEGIN; }
step s1lock { LOCK TABLE t; }
step s1notice { DO $$ BEGIN RAISE NOTICE 'from s1'; END $$; }
step s1c { COMMIT; }

session s2
step s2w { SELECT count(*) AS n, NULL::text AS nothing, '' AS empty FROM t; }
step s2n { DO $$ BEGIN RAISE NOTICE 'one'; PERFORM pg_sleep(0.2); RAISE NOTICE 'two'; END $$; }
step s2notify { LISTEN ch; NOTIFY ch, 'hi'; }
step s2err { SELECT 1/0; SELECT 2; }

session s3
step s3 { SELECT 'after one notice' AS s3; }

permutation s1lock s2w s1notice s1c
permutation s2n(*) s3(s2n notices 1) s2notify
permutation s2n s3(s2n)
permutation s2err s2notify
"""

NOTICES_OUT = """\
Parsed test spec with 3 sessions

starting permutation: s1lock s2w s1notice s1c
step s1lock: LOCK TABLE t;
step s2w: SELECT count(*) AS n, NULL::text AS nothing, '' AS empty FROM t; <waiting ...>
s1: NOTICE:  from s1
step s1notice: DO $$ BEGIN RAISE NOTICE 'from s1'; END $$;
step s1c: COMMIT;
step s2w: <... completed>
n|nothing|empty
-+-------+-----
0|       |     
(1 row)


starting permutation: s2n s3 s2notify
step s2n: DO $$ BEGIN RAISE NOTICE 'one'; PERFORM pg_sleep(0.2); RAISE NOTICE 'two'; END $$; <waiting ...>
step s3: SELECT 'after one notice' AS s3; <waiting ...>
s2: NOTICE:  one
s2: NOTICE:  two
step s2n: <... completed>
step s2notify: LISTEN ch; NOTIFY ch, 'hi';
s2: NOTIFY "ch" with payload "hi" from s2
step s3: <... completed>
s3              
----------------
after one notice
(1 row)


starting permutation: s2n s3
s1: WARNING:  there is already a transaction in progress
s2: NOTICE:  one
s2: NOTICE:  two
step s2n: DO $$ BEGIN RAISE NOTICE 'one'; PERFORM pg_sleep(0.2); RAISE NOTICE 'two'; END $$;
step s3: SELECT 'after one notice' AS s3;
s3              
----------------
after one notice
(1 row)


starting permutation: s2err s2notify
s1: WARNING:  there is already a transaction in progress
step s2err: SELECT 1/0; SELECT 2;
ERROR:  division by zero
step s2notify: LISTEN ch; NOTIFY ch, 'hi';
s2: NOTIFY "ch" with payload "hi" from s2
"""


async def test_notices_blockers_notify_and_errors(tmp_path, pg_backend):
    """Notices print as libpq hands them, prefixed by the session, when the
    tester reads that connection (so a step's own notices come before its
    step line); (*) prints waiting at launch; (step notices N) holds the
    report until N more notices arrived; NOTIFY lines follow the step."""
    output, completed = await _run_text(tmp_path, pg_backend, NOTICES)
    assert completed
    assert output.decode() == NOTICES_OUT


async def test_only_lock_waits_count_as_waiting(tmp_path, pg_backend):
    text = """\
session s1
step slow { SELECT pg_sleep(0.3) IS NOT NULL AS slept; }
session s2
step s2 { SELECT 2 AS two; }
permutation slow s2
"""
    output, _ = await _run_text(tmp_path, pg_backend, text)
    assert b"<waiting" not in output
    assert output.startswith(b"Parsed test spec with 2 sessions\n\nstarting permutation: slow s2\n"
                             b"step slow: SELECT pg_sleep(0.3) IS NOT NULL AS slept;\nslept\n-----\nt    \n(1 row)\n\n")


async def test_setup_failure_ends_the_spec_as_upstream(tmp_path, pg_backend):
    text = """\
setup { CREATE TABLE t (a int); }
setup { SELECT * FROM nosuchtable; }
session s1
step s1 { SELECT 1; }
step unused { SELECT 2; }
permutation s1
permutation s1
"""
    output, completed = await _run_text(tmp_path, pg_backend, text)
    assert not completed
    assert output == (b"unused step name: unused\nParsed test spec with 1 sessions\n\nstarting permutation: s1\n"
                      b"setup failed: ERROR:  relation \"nosuchtable\" does not exist\n"
                      b"LINE 1: SELECT * FROM nosuchtable;\n                      ^\n")


async def test_step_timeout_cancels_with_upstreams_message(tmp_path, pg_backend):
    text = """\
setup { CREATE TABLE t (a int); }
teardown { DROP TABLE t; }
session s1
setup { BEGIN; }
step s1lock { LOCK TABLE t; }
teardown { ROLLBACK; }
session s2
step s2sel { SELECT * FROM t; }
permutation s1lock s2sel
"""
    output, completed = await _run_text(tmp_path, pg_backend, text, step_timeout=0.5)
    assert completed
    assert output.decode().endswith(
        "step s2sel: SELECT * FROM t; <waiting ...>\n"
        "isolationtester: canceling step s2sel after 0 seconds\n"
        "step s2sel: <... completed>\n"
        "ERROR:  canceling statement due to user request\n")


async def test_mutually_blocking_annotations_abort(tmp_path, pg_backend):
    text = """\
setup { CREATE TABLE t (a int); }
session s1
setup { BEGIN; }
step hold { LOCK TABLE t; }
session s2
step a { SELECT * FROM t; }
session s3
step b { SELECT 2 AS b; }
permutation hold a(b) b(a)
"""
    output, completed = await _run_text(tmp_path, pg_backend, text, step_timeout=0.5)
    assert not completed
    assert output.decode().endswith(
        "step a: SELECT * FROM t; <waiting ...>\nstep b: SELECT 2 AS b; <waiting ...>\n"
        "isolationtester: canceling step a after 0 seconds\n"
        "failed to complete permutation due to mutually-blocking steps\n")


async def test_run_specs_compares_and_reports(tmp_path, pg_server, capfdbinary, monkeypatch):
    """Through the CLI hook, on the server as a DSN (lockrace's own schema only):
    stdout is the transcript, a match exits 0, a mismatch exits 1 with a diff."""
    from lockrace.isolation.cli import run_specs

    # DSN mode drops its sandbox schema at the end: not the one other tests use
    monkeypatch.setenv("LOCKRACE_SANDBOX", "lockrace_isolation_cli_test")
    from lockrace.scenario.spec_format import read_spec

    folder = UPSTREAM
    spec = read_spec(folder / "specs" / "nowait.spec")
    from lockrace.runtime.options import RunOptions, ServerChoice

    args = RunOptions(engine=None, expected=str(folder / "expected"), step_timeout=30.0, format="transcript",
                      servers=ServerChoice({"postgres": pg_server.conninfo}))
    assert await run_specs([spec], args) == 0
    out, err = capfdbinary.readouterr()
    assert out == (folder / "expected" / "nowait.out").read_bytes()
    assert b"matches" in err and b"wall time" in err

    wrong = tmp_path / "nowait.out"
    wrong.write_bytes(out.replace(b"ERROR:  could not obtain lock", b"ERROR:  could not get lock", 1))
    args.expected = str(wrong)
    assert await run_specs([spec], args) == 1
    out, err = capfdbinary.readouterr()
    assert b"-ERROR:  could not get lock" in err and b"+ERROR:  could not obtain lock" in err
    assert b"DIFFERS" in err


def test_spec_in_memory_needs_no_file():
    sc = parse_spec("session s\nstep x { SELECT 1; }\n")
    assert sc.path is None and sc.name == "spec"


async def test_terminated_session_is_reported_as_upstream(tmp_path, pg_backend):
    """The FATAL error and libpq's own message print under the step; the next
    step on the dead connection cannot be sent and the spec stops."""
    text = """\
session s1
step kill { SELECT count(pg_terminate_backend(pid)) AS killed FROM pg_stat_activity WHERE application_name LIKE '%/s2'; }
session s2
step s2a { SELECT 1 AS one; }
step s2b { SELECT 2 AS two; }
permutation s2a kill s2b s2a
"""
    output, completed = await _run_text(tmp_path, pg_backend, text)
    assert not completed
    assert output.decode().endswith(
        "step s2b: SELECT 2 AS two;\n"
        "FATAL:  terminating connection due to administrator command\n"
        "server closed the connection unexpectedly\n"
        "\tThis probably means the server terminated abnormally\n"
        "\tbefore or while processing the request.\n\n"
        "failed to send query for step s2a: no connection to the server\n\n")
