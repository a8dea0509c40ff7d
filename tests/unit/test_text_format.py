"""The .race reader and writer: round trip, and clear file:line errors."""

import pytest

from lockrace.scenario.errors import ScenarioError
from lockrace.scenario.library import builtin_paths, load
from lockrace.scenario.text_format import parse_scenario, write_scenario

GOOD = """\
title: t
engines: postgres, mysql
setup:
    CREATE TABLE t (id int);
setup[mariadb]:
    CREATE TABLE t (id int) ENGINE=InnoDB;
A> BEGIN;
B> SELECT *
   FROM t  -- a comment
   FOR UPDATE;
    expect: ok
    rows: 0
    code[mariadb]: 1205
    completes-after: 3
note: commit now
A> COMMIT;
"""


def test_parse_good():
    sc = parse_scenario(GOOD, path="x.race", name="x")
    assert sc.engines == ["postgres", "mysql"]
    assert [s.session for s in sc.steps] == ["A", "B", "A"]
    assert sc.steps[1].sql == "SELECT *\n   FROM t  -- a comment\n   FOR UPDATE;"
    assert sc.steps[2].note == "commit now"
    assert sc.setup_for("mariadb") == ["CREATE TABLE t (id int) ENGINE=InnoDB;"]
    assert sc.setup_for("postgres") == ["CREATE TABLE t (id int);"]
    assert sc.steps[1].expects_blocking("postgres")
    keys = {e.key for e in sc.steps[1].applicable("mariadb")}
    assert keys == {"outcome", "rows", "code", "completes_after"}
    assert {e.key for e in sc.steps[1].applicable("postgres")} == {"outcome", "rows", "completes_after"}


def test_flavor_expectation_overrides_generic():
    sc = load(next(p for p in builtin_paths() if p.stem == "mysql-nowait"))
    step = sc.steps[2]
    assert [e.value for e in step.applicable("mariadb") if e.key == "code"] == ["1205"]
    assert [e.value for e in step.applicable("mysql8") if e.key == "code"] == ["3572"]


@pytest.mark.parametrize("path", builtin_paths(), ids=lambda p: p.stem)
def test_builtins_round_trip(path):
    sc = load(path)
    again = parse_scenario(write_scenario(sc), path="rt.race", name=sc.name)
    assert [(s.session, s.sql, s.note, s.comment) for s in again.steps] == [
        (s.session, s.sql, s.note, s.comment) for s in sc.steps]
    assert [[(e.key, e.value, e.flavor) for e in s.expectations] for s in again.steps] == [
        [(e.key, e.value, e.flavor) for e in s.expectations] for s in sc.steps]
    assert (again.title, again.lesson, again.engines, again.setup, again.teardown) == (
        sc.title, sc.lesson, sc.engines, sc.setup, sc.teardown)


@pytest.mark.parametrize("text,line,fragment", [
    ("engines: postgres\nA> SELECT 1\n", 2, "never ends"),
    ("engines: oracle\nA> SELECT 1;\n", 1, "engines must be among"),
    ("engines: postgres\ncolour: red\nA> SELECT 1;\n", 2, "unknown key 'colour'"),
    ("engines: postgres\nA> SELECT 1;\n    expect: exploded\n", 3, "unknown outcome 'exploded'"),
    ("engines: postgres\nA> SELECT 1;\n    rows: many\n", 3, "whole number"),
    ("engines: postgres\nA> SELECT 1;\n    code: banana\n", 3, "SQLSTATE"),
    ("engines: postgres\nA> SELECT 1;\n    completes-after: 1\n", 3, "later step"),
    ("engines: postgres\nA> SELECT 1;\n    blocked-by: Z\n", 3, "no session named Z"),
    ("engines: postgres\nA> SELECT 1;\n    wobble: 1\n", 3, "unknown expectation"),
    ("engines: postgres\nA> SELECT 1;\ntitle: late\n", 3, "before the first step"),
    ("    stray indent\nengines: postgres\nA> SELECT 1;\n", 1, "indented line"),
    ("engines: postgres\nrows: 1\nA> SELECT 1;\n", 2, "must be indented"),
    ("title: no steps\nengines: postgres\n", 2, "no steps"),
    ("A> SELECT 1;\n", 1, "missing 'engines:'"),
    ("engines: postgres\nsetup[oracle]:\n    x\nA> SELECT 1;\n", 2, "unknown flavor"),
])
def test_errors_name_file_and_line(text, line, fragment):
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, path="bad.race", name="bad")
    assert str(info.value).startswith(f"bad.race:{line}: ")
    assert fragment in str(info.value)


RICH = """\
title: rich
engines: postgres, mysql
A[postgres]> SELECT 1 FOR SHARE;  -- per engine
A[mysql]> SELECT 1 LOCK IN SHARE MODE;
    rows-exactly: 1
    rows-exactly[mysql]: 1 | x
    lock: row
    notice: SET LOCAL can only be used in transaction blocks
    took: <= budget + 50ms
    expect: ok | deadlock
B> SELECT 2;
    took: < 2s
one-of: 1, 2 expect deadlock
"""


def test_richer_format_reads_and_writes_back():
    sc = parse_scenario(RICH, name="rich")
    first = sc.steps[0]
    assert first.variants == {"postgres": "SELECT 1 FOR SHARE;", "mysql": "SELECT 1 LOCK IN SHARE MODE;"}
    assert first.sql_for("postgres") == "SELECT 1 FOR SHARE;"
    assert first.sql_for("mariadb") == first.sql_for("mysql8") == "SELECT 1 LOCK IN SHARE MODE;"
    assert sc.for_flavor("mariadb").steps[0].sql == "SELECT 1 LOCK IN SHARE MODE;"
    assert len(sc.steps) == 2
    keys = {e.key: e.value for e in first.applicable("postgres")}
    assert keys["rows_exactly"] == [["1"]] and keys["lock"] == "row" and keys["outcome"] == "ok | deadlock"
    assert str(keys["took"]) == "<= budget + 50ms"
    assert str(sc.steps[1].expectations[0].value) == "< 2000ms"
    assert [(a.steps, a.outcome) for a in sc.across] == [(["1", "2"], "deadlock")]
    text = write_scenario(sc)
    assert "A[mysql]> SELECT 1 LOCK IN SHARE MODE;" in text and "one-of: 1, 2 expect deadlock" in text
    assert write_scenario(parse_scenario(text)) == text


@pytest.mark.parametrize("text, words", [
    ("engines: postgres, mysql\nA[postgres]> SELECT 1;\n", "has per-engine SQL but none for mariadb"),
    ("engines: postgres\nA[oracle]> SELECT 1;\n", "unknown flavor 'oracle'"),
    ("engines: postgres\nA> SELECT 1;\none-of: 1, 9 expect deadlock\n", "one-of: no step 9"),
    ("engines: postgres\nA> SELECT 1;\nB> SELECT 1;\none-of: 1, 2 expect doom\n", "unknown outcome 'doom'"),
    ("engines: postgres\nA> SELECT 1;\none-of: 1 deadlock\n", "one-of: expected 'STEP, STEP expect OUTCOME'"),
    ("engines: postgres\nA> SELECT 1;\n    took: about a second\n", "took: expected a bound"),
    ("engines: postgres\nA> SELECT 1;\n    lock: page\n", "lock must be one of"),
    ("engines: postgres\nA> SELECT 1;\n    expect: ok | maybe\n", "unknown outcome 'maybe'"),
])
def test_richer_format_errors(text, words):
    with pytest.raises(ScenarioError) as err:
        parse_scenario(text, path="x.race")
    assert words in str(err.value)
