"""The headless CLI as a user runs it: exit codes, messages, JSON."""

import json
import subprocess
import sys

import pytest
from support.paths import REPO



def lockrace(*args, env=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "lockrace", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=timeout, env=env)


def test_list_json():
    out = lockrace("list", "--json")
    assert out.returncode == 0
    items = json.loads(out.stdout)
    names = {i["name"] for i in items}
    assert {"pg-nowait", "mysql-skip-locked"} <= names
    assert all(set(i) >= {"name", "title", "engines"} for i in items)


def test_help_is_complete():
    top = lockrace("--help").stdout
    for word in ("run", "list", "bench", "--pg", "--mysql", "--engine", "--scenario", "LOCKRACE_PG_DSN"):
        assert word in top
    run = lockrace("run", "--help").stdout
    for word in ("--engine", "--format", "--step-timeout", "--pg", "--mysql", "--expected", "exit status"):
        assert word in run


@pytest.mark.parametrize("before", [True, False], ids=["before the command", "after it"])
@pytest.mark.parametrize("flag,dsn,scenario", [
    ("--mysql", "mysql://root@127.0.0.1:1/", "mysql-nowait"),
    ("--pg", "postgresql://postgres@127.0.0.1:1/postgres", "pg-nowait"),
])
def test_server_flag_before_or_after_the_command_is_the_one_used(flag, dsn, scenario, before):
    """``lockrace --mysql DSN run X`` runs on that server, not on a private one: a
    DSN nobody listens on is a clear exit 2 wherever the flag stands."""
    args = (flag, dsn, "run", scenario) if before else ("run", scenario, flag, dsn)
    out = lockrace(*args)
    assert out.returncode == 2, out.stdout[-500:]
    assert "cannot connect" in out.stderr and "127.0.0.1" in out.stderr
    assert "private" not in out.stdout


def test_server_flag_after_the_command_wins():
    from lockrace.cli import build_parser
    from lockrace.runtime.options import ServerChoice

    parser = build_parser()
    for argv, want in ((["--mysql", "X", "run", "a"], "X"), (["run", "a", "--mysql", "Y"], "Y"),
                       (["--mysql", "X", "run", "a", "--mysql", "Y"], "Y"), (["run", "a"], None),
                       (["--mysql", "X", "bench"], "X"), (["--mysql", "X", "locks"], "X"),
                       (["--mysql", "X", "rehearse", "m.sql"], "X")):
        assert ServerChoice.from_flags(parser.parse_args(argv)).dsn("mysql") == want, argv


def test_malformed_file_exits_2_with_file_and_line(tmp_path):
    bad = tmp_path / "bad.race"
    bad.write_text("engines: postgres\nA> SELECT 1;\n    expect: exploded\n")
    out = lockrace("run", str(bad))
    assert out.returncode == 2
    assert f"{bad}:3: unknown outcome 'exploded'" in out.stderr
    assert "Traceback" not in out.stderr


def test_unknown_builtin_exits_2():
    out = lockrace("run", "no-such-scenario")
    assert out.returncode == 2
    assert "no built-in scenario" in out.stderr


@pytest.mark.postgres
def test_wrong_expectation_exits_1_naming_the_step(tmp_path):
    source = (REPO / "scenarios" / "pg-nowait.race").read_text()
    wrong = source.replace("    code: 55P03\n", "    code: 40P01\n")
    assert wrong != source
    path = tmp_path / "wrong.race"
    path.write_text(wrong)
    out = lockrace("run", str(path))
    assert out.returncode == 1, out.stdout + out.stderr
    assert "FAILED on PostgreSQL 18" in out.stdout
    assert "step 3 (B> SELECT id FROM accounts WHERE id = 1 FOR UPDATE NOWAIT;): expected code: 40P01, got 55P03" in out.stdout


@pytest.mark.postgres
def test_run_transcript_and_json():
    out = lockrace("run", "pg-nowait", "--format", "json")
    assert out.returncode == 0, out.stderr
    [report] = json.loads(out.stdout)
    assert report["passed"] and report["server"].startswith("PostgreSQL 18")
    refused = report["steps"][2]
    assert refused["outcome"] == "refused" and refused["code"] == "55P03"
    assert refused["held_by"] == ["A"]  # asked right after the refusal
    text = lockrace("run", "pg-nowait").stdout
    assert 'ERROR: 55P03: could not obtain lock on row in relation "accounts"' in text
    assert "; lock held by A" in text
    assert "Verified against PostgreSQL 18" in text
