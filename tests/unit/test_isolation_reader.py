"""The isolation-spec reader: grammar, blockers, interleavings, errors (no server)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lockrace.scenario.errors import ScenarioError
from lockrace.scenario.library import load
from lockrace.scenario.spec_format import parse_spec, unused_steps
from support.paths import TESTS

SPEC = """\
# a comment
setup { CREATE TABLE a (i int); }
setup
{
  INSERT INTO a VALUES (1);
}
teardown { DROP TABLE a; }

session s1
setup\t\t{ BEGIN; }
step s1a\t{ SELECT 1; }
step "s1 b"\t{ SELECT "x" FROM a; }  # trailing comment
teardown { ROLLBACK; }

session s2
step s2a { SELECT 2; }
step s2b {
\tUPDATE a SET i = 2;
}

session s3
step s3a { NOTIFY c; }

permutation s1a s2a(*) "s1 b"(s2a, s3a notices 2) s3a s2b
permutation s2a s1a
"""


def test_reads_setups_sessions_steps_and_blockers():
    sc = parse_spec(SPEC, "x.spec")
    assert sc.kind == "isolation-spec" and sc.name == "x" and sc.engines == ["postgres"]
    assert sc.setup == {None: ["CREATE TABLE a (i int);", "\n  INSERT INTO a VALUES (1);\n"]}
    assert sc.teardown == {None: ["DROP TABLE a;"]}
    assert [s.name for s in sc.sessions] == ["s1", "s2", "s3"]
    assert sc.sessions[0].setup == ["BEGIN;"] and sc.sessions[0].teardown == ["ROLLBACK;"]
    assert sc.sessions[1].setup == [] and sc.sessions[1].teardown == []
    assert [(s.name, s.session) for s in sc.steps] == [
        ("s1a", "s1"), ("s1 b", "s1"), ("s2a", "s2"), ("s2b", "s2"), ("s3a", "s3")]
    # only spaces/tabs next to the braces go; newlines stay, as upstream prints them
    assert sc.step("s2b").sql == "\n\tUPDATE a SET i = 2;\n"
    assert sc.step("s1 b").sql == 'SELECT "x" FROM a;'
    assert sc.step("s1 b").line == 12
    first = sc.permutations[0]
    assert [e.step for e in first] == ["s1a", "s2a", "s1 b", "s3a", "s2b"]
    assert [(b.step, b.notices) for b in first[1].blockers] == [(None, None)]
    assert [(b.step, b.notices) for b in first[2].blockers] == [("s2a", None), ("s3a", 2)]
    assert sc.explicit_permutations


def test_unused_steps_are_listed_in_strcmp_order():
    sc = parse_spec(SPEC.replace(" s2b\n", "\n"), "x.spec")
    assert unused_steps(sc) == ["s2b"]
    assert unused_steps(parse_spec(SPEC, "x.spec")) == []


def test_no_permutation_means_every_interleaving_in_upstream_order():
    sc = parse_spec("session a\nstep a1 {1}\nstep a2 {2}\nsession b\nstep b1 {3}\nstep b2 {4}\n", "i.spec")
    orders = [" ".join(e.step for e in p) for p in sc.permutations]
    assert orders == ["a1 a2 b1 b2", "a1 b1 a2 b2", "a1 b1 b2 a2", "b1 a1 a2 b2", "b1 a1 b2 a2", "b1 b2 a1 a2"]
    assert not sc.explicit_permutations and unused_steps(sc) == []
    three = parse_spec("session a\nstep a1 {1}\nstep a2 {2}\nsession b\nstep b1 {3}\nsession c\nstep c1 {4}\n")
    assert len(three.permutations) == 12  # 4! / 2!
    for perm in three.permutations:
        names = [e.step for e in perm]
        assert names.index("a1") < names.index("a2")
    # built on demand: walking them and picking one by number agree
    walked = [[e.step for e in p] for p in three.permutations]
    assert walked == [[e.step for e in three.permutations[k]] for k in range(12)]
    assert len({tuple(w) for w in walked}) == 12
    assert [e.step for e in three.permutations[-1]] == walked[-1] == ["c1", "b1", "a1", "a2"]


def test_engines_comment():
    sc = parse_spec("# engines: mysql\nsession a\nstep a1 { SELECT 1; }\n")
    assert sc.engines == ["mysql"]


@pytest.mark.parametrize("text, line, fragment", [
    ("session a\nstep a1 { SELECT 1;\n", 2, "unterminated sql block"),
    ("session a\nstep a1 { 1 }\nstep a1 { 2 }\n", 3, "duplicate step name: a1"),
    ("session a\nstep a1 { 1 }\npermutation a1 zz\n", 3, 'undefined step "zz" specified in permutation'),
    ("session a\nstep a1 { 1 }\nsession b\nstep b1 { 1 }\npermutation a1(zz) b1\n", 5,
     'undefined blocking step "zz" referenced in permutation step "a1"'),
    ("session a\nstep a1 { 1 }\nstep a2 { 2 }\npermutation a1 a2(a1)\n", 4, "cannot block on its own session"),
    ("session a\nstep a1 { 1 }\nsession b\nstep b1 { 1 }\npermutation a1(b1 notices) b1\n", 5,
     "expected a number after notices"),
    ("session a\n\nstep a1 { 1 } ;\n", 3, "unexpected character"),
    ("setup { 1 }\n", 2, "expected a session"),
    ('session "a\nstep a1 { 1 }\n', 1, "unexpected newline in quoted identifier"),
    ("session a\nsession b\nstep b1 { 1 }\n", 2, "session a has no steps"),
    ("session a\nstep a1 { 1 }\npermutation a1(\n", 4, "a step name or *"),
])
def test_errors_name_file_and_line(text, line, fragment):
    with pytest.raises(ScenarioError) as info:
        parse_spec(text, "bad.spec")
    assert info.value.line == line, str(info.value)
    assert fragment in info.value.message
    assert str(info.value).startswith(f"bad.spec:{line}: ")


def test_library_dispatches_spec_files(tmp_path: Path):
    path = tmp_path / "tiny.spec"
    path.write_text("session s\nstep one { SELECT 1; }\n")
    sc = load(path)
    assert sc.kind == "isolation-spec" and sc.name == "tiny" and sc.path == path
    assert sc.order()[0][0].step == "one"


def test_reads_all_upstream_specs(upstream_specs):
    for spec in upstream_specs:
        sc = load(spec)
        assert sc.sessions and sc.permutations, spec


@pytest.fixture
def upstream_specs():
    from support.isolation import UPSTREAM, specs_in

    specs = specs_in(UPSTREAM)
    assert len(specs) == 19
    return specs


def test_tests_read_nothing_outside_the_repository():
    """A fresh clone has nothing beside it: no test may reach for a folder
    next to the repository (such as ../shared); test data lives in tests/."""
    tests = TESTS
    offenders = []
    for source in sorted(tests.rglob("*.py")):
        text = source.read_text(encoding="utf-8")
        for pattern in (r"parents\[2\]\s*/", r"[\"']\.\./shared", r"/\s*[\"']shared[\"']"):
            if re.search(pattern, text):
                offenders.append(f"{source.relative_to(tests)}: {pattern}")
    assert offenders == []
