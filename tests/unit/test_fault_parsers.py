"""Fault matrix 5: malformed scenario and spec files (hypothesis).

Both readers -- lockrace's ``.race`` format (text_format) and PostgreSQL
isolation specs (spec_format) -- are fed random text, random bytes and
mutations of the real files in the repository (built-in scenarios, the
isolation specs under tests/isolation): lines deleted, duplicated, swapped,
truncated, random characters and bytes spliced in.  They may only ever return
a Scenario or raise ScenarioError whose text starts with ``file:line:`` (or
``file:`` for whole-file problems such as undecodable bytes) -- never another
exception, never a hang.  Runs are derandomized, so CI sees the same cases.
"""

from __future__ import annotations

import os
import signal
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.cli import server_tmp  # noqa: F401  (fixture)

from lockrace.scenario.errors import ScenarioError
from lockrace.scenario.model import Scenario
from lockrace.scenario.spec_format import parse_spec, read_spec
from lockrace.scenario.text_format import parse_scenario, read_scenario, write_scenario
from support.paths import REPO

RACE_FILES = sorted((REPO / "scenarios").glob("*.race"))
SPEC_FILES = sorted((REPO / "tests" / "isolation").rglob("*.spec"))
RACE_TEXTS = [p.read_text() for p in RACE_FILES]
SPEC_TEXTS = [p.read_text() for p in SPEC_FILES]

FUZZ = settings(
    max_examples=150,
    deadline=1000,  # ms per example; a parser that is slow on some input fails here
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


class Hang(BaseException):
    """Raised by the watchdog; a BaseException so no parser can swallow it."""


@contextmanager
def watchdog(seconds: float = 5.0):
    """Fail instead of hanging forever (deadline= only judges finished examples)."""

    def fire(signum, frame):
        raise Hang(f"parser still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def check_outcome(call, path: str, text: str | None = None) -> Scenario | ScenarioError:
    """Run one parse; it must return a Scenario or raise a located ScenarioError."""
    with watchdog():
        try:
            result = call()
        except ScenarioError as exc:
            message = str(exc)
            assert message.startswith(f"{path}:"), message
            assert exc.message and "Traceback" not in message
            if exc.line is not None:
                assert message.startswith(f"{path}:{exc.line}: "), message
                if text is not None:
                    assert 1 <= exc.line <= max(1, len(text.splitlines()) + 1), (exc.line, message)
            return exc
    assert isinstance(result, Scenario)
    return result


# ------------------------------------------------------------------ mutations


@st.composite
def mutated(draw, texts: list[str]) -> str:
    lines = draw(st.sampled_from(texts)).splitlines()
    alphabet = st.characters(codec="utf-8", exclude_categories=("Cs",))
    fragments = st.sampled_from([
        "A> ", "B> SELECT 1;", "    expect: ", "    code: 55P03", "    completes-after: 99", "    blocked-by: Z",
        "title:", "engines: postgres, mysql", "engines: oracle", "setup[mariadb]:", "note:", "steps:", "\t", ";",
        "session s1", "step s1a { SELECT 1; }", "permutation s1a(*) s2a(s1a notices 3)", "{", "}", '"', "(", ")",
        "setup { CREATE TABLE t (id int); }", "teardown {", "# engines: mysql", "\x00", "\ufeff", "\r",
    ])
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["delete", "duplicate", "swap", "insert", "splice", "truncate", "indent"]))
        if not lines and op != "insert":
            continue
        i = draw(st.integers(0, max(0, len(lines) - 1)))
        if op == "delete":
            del lines[i]
        elif op == "duplicate":
            lines[i:i] = [lines[i]] * draw(st.integers(1, 3))
        elif op == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "insert":
            lines.insert(i, draw(fragments | st.text(alphabet, max_size=30)))
        elif op == "splice":
            line = lines[i]
            at = draw(st.integers(0, len(line)))
            cut = draw(st.integers(0, 5))
            lines[i] = line[:at] + draw(fragments | st.text(alphabet, max_size=8)) + line[at + cut:]
        elif op == "truncate":
            lines = lines[:i]
        elif op == "indent":
            lines[i] = draw(st.sampled_from(["", " ", "    ", "\t"])) + lines[i].lstrip()
    return "\n".join(lines) + draw(st.sampled_from(["", "\n", "\n\n"]))


def byte_mutated(texts: list[str]):
    @st.composite
    def build(draw) -> bytes:
        data = bytearray(draw(st.sampled_from(texts)).encode())
        for _ in range(draw(st.integers(1, 4))):
            at = draw(st.integers(0, len(data)))
            data[at:at + draw(st.integers(0, 3))] = draw(st.binary(min_size=1, max_size=6))
        return bytes(data)

    return build()


def _write(data: bytes, suffix: str) -> str:
    fd, name = tempfile.mkstemp(suffix=suffix, prefix="fuzz-")
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    return name


# ------------------------------------------------------------------ .race


def test_corpus_is_there():
    assert len(RACE_TEXTS) >= 6 and len(SPEC_TEXTS) >= 4
    for path, text in zip(RACE_FILES, RACE_TEXTS):
        assert isinstance(parse_scenario(text, path=path), Scenario)
    for path, text in zip(SPEC_FILES, SPEC_TEXTS):
        assert isinstance(parse_spec(text, path), Scenario)


@FUZZ
@given(st.text(max_size=400))
def test_race_random_text(text):
    check_outcome(lambda: parse_scenario(text, path="fuzz.race"), "fuzz.race", text)


@FUZZ
@given(mutated(RACE_TEXTS))
def test_race_mutated_builtins(text):
    result = check_outcome(lambda: parse_scenario(text, path="m.race"), "m.race", text)
    if isinstance(result, Scenario):
        # whatever it accepted, it can write back and read again
        again = parse_scenario(write_scenario(result), path="again.race")
        assert [(s.session, s.sql) for s in again.steps] == [(s.session, s.sql) for s in result.steps]


@FUZZ
@given(byte_mutated(RACE_TEXTS))
def test_race_files_with_random_bytes(data):
    name = _write(data, ".race")
    try:
        check_outcome(lambda: read_scenario(name), name)
    finally:
        os.unlink(name)


# ------------------------------------------------------------------ .spec


@FUZZ
@given(st.text(max_size=400))
def test_spec_random_text(text):
    check_outcome(lambda: parse_spec(text, "fuzz.spec"), "fuzz.spec", text)


@FUZZ
@given(mutated(SPEC_TEXTS))
def test_spec_mutated_files(text):
    check_outcome(lambda: parse_spec(text, "m.spec"), "m.spec", text)


@FUZZ
@given(byte_mutated(SPEC_TEXTS))
def test_spec_files_with_random_bytes(data):
    name = _write(data, ".spec")
    try:
        check_outcome(lambda: read_spec(name), name)
    finally:
        os.unlink(name)


# ------------------------------------------------------------------ edge cases found by hand


@pytest.mark.parametrize("text", [
    "",
    "\n\n\n",
    "A>",
    "A> ;",
    "engines: postgres\nA> SELECT 'unterminated;\n",
    "engines: postgres\nA> SELECT 1\n",
    "engines: postgres\nA> SELECT 1;\n    completes-after: 999999999999999999999999\n",
    "engines: postgres\n" + "A> SELECT 1;\n" * 5000,
    "engines: postgres\nA> SELECT 1;\n    row: " + "|" * 10000 + "\n",
    "title:\n" + "    x\n" * 20000,
], ids=lambda text: repr(text[:24]) + (f"..{len(text)}" if len(text) > 24 else ""))
def test_race_edge_cases(text):
    check_outcome(lambda: parse_scenario(text, path="edge.race"), "edge.race", text)


@pytest.mark.parametrize("text", [
    "",
    "session s1",
    "session s1 step a {",
    'session "unterminated',
    "session s1 step a { SELECT 1; } permutation a(",
    "session s1 step a { SELECT 1; } permutation a(notices notices)",
    "session s1 step a { SELECT 1; } permutation a(* notices 99999999999999999999999)",
    # one session with many steps: a single interleaving, but a deep one
    "session s1\n" + "".join(f"step s{i} {{ SELECT {i}; }}\n" for i in range(3000)),
    # many sessions, no permutation: too many interleavings to enumerate
    "".join(f"session p{i}\nstep a{i} {{ SELECT 1; }}\nstep b{i} {{ SELECT 2; }}\n" for i in range(12)),
], ids=lambda text: repr(text[:24]) + (f"..{len(text)}" if len(text) > 24 else ""))
def test_spec_edge_cases(text):
    check_outcome(lambda: parse_spec(text, "edge.spec"), "edge.spec", text)


# ------------------------------------------------------------------ through the CLI


def test_malformed_files_through_lockrace_run(tmp_path):
    """The same errors reach the user as one line, ``lockrace: file:line: ...``, exit 2."""
    import json
    import subprocess
    import sys

    from support.cli import REPO as ROOT
    from support.cli import lockrace_env

    files = {
        "steps.race": ("engines: postgres\nA> SELECT 1\n    expect: ok\n", ":2: "),
        "binary.race": (b"engines: postgres\nA> SELECT \x00\xff\xfe;\n", ": "),
        "session.spec": ("session s1\nstep a { SELECT 1; }\npermutation a b\n", ":3: "),
        "unterminated.spec": ("setup { CREATE TABLE t (id int);\nsession s1\n", ":1: "),
        "nul.spec": ("setup { CREATE TABLE t (x int); }\nsession s1\nstep d { DELETE FROM t\x00 WHERE x = 1; }\n", ":3: "),
        "nul.race": ("engines: postgres\nA> DELETE FROM t\x00 WHERE x = 1;\n", ":2: "),
        "superscript.race": ("engines: postgres\nA> SELECT 1;\n    rows: \u00b2\n", ":3: "),
    }
    cases = []
    for name, (content, _) in files.items():
        path = tmp_path / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        cases.append({"argv": ["run", str(path)]})
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    out = subprocess.run([sys.executable, str(ROOT / "tests" / "support" / "run_many.py"), str(tmp_path / "cases.json")],
                         cwd=ROOT, env=lockrace_env(), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    for (name, (_, where)), result in zip(files.items(), json.loads(out.stdout)):
        lines = result["stderr"].strip().splitlines()
        assert result["code"] == 2, (name, result)
        assert len(lines) == 1 and "Traceback" not in result["stderr"], (name, result)
        assert lines[0].startswith(f"lockrace: {tmp_path / name}{where}"), (name, lines[0])


# ------------------------------------------------------------------ input that once escaped


def test_nul_byte_in_a_step_is_refused_with_its_line():
    """libpq ends the SQL at a NUL: ``DELETE FROM t\\0 WHERE x = 1`` would delete every row."""
    spec = "setup { CREATE TABLE t (x int); }\nsession s1\nstep del { DELETE FROM t\x00 WHERE x = 1; }\n"
    race = "engines: postgres, mysql\nA> BEGIN;\nA> DELETE FROM t\x00 WHERE x = 1;\n"
    for call, path, line in ((lambda: parse_spec(spec, "nul.spec"), "nul.spec", 3),
                             (lambda: parse_scenario(race, path="nul.race"), "nul.race", 3)):
        err = check_outcome(call, path)
        assert isinstance(err, ScenarioError) and err.line == line, err
        assert "NUL" in err.message, err


@pytest.mark.parametrize("key", ["rows", "skipped", "completes-after"])
@pytest.mark.parametrize("value", ["²", "١", "𝟙", "1²", "٣0", "9" * 5000, "12345678901"])
def test_whole_numbers_are_ascii_digits(key, value):
    """str.isdigit() is true for '²', Arabic-Indic and mathematical digits, which
    int() refuses or reads; and int() refuses 5000 digits.  Each is a file:line error."""
    text = f"engines: postgres\nA> SELECT 1;\nA> SELECT 2;\n    {key}: {value}\n"
    err = check_outcome(lambda: parse_scenario(text, path="n.race"), "n.race", text)
    assert isinstance(err, ScenarioError) and err.line == 4, err


def test_other_numbers_are_checked_the_same_way():
    race = "engines: postgres\nA> SELECT 1;\n    code: ١٢٠٥\n"
    err = check_outcome(lambda: parse_scenario(race, path="c.race"), "c.race", race)
    assert isinstance(err, ScenarioError) and err.line == 3, err
    spec = "session a\nstep a1 { SELECT 1; }\nsession b\nstep b1 { SELECT 2; }\npermutation a1(b1 notices " + "9" * 5000 + ") b1\n"
    err = check_outcome(lambda: parse_spec(spec, "c.spec"), "c.spec", spec)
    assert isinstance(err, ScenarioError) and err.line == 5, err


def test_byte_order_mark_is_accepted(tmp_path):
    race = tmp_path / "bom.race"
    race.write_bytes(b"\xef\xbb\xbf" + RACE_TEXTS[0].encode())
    spec = tmp_path / "bom.spec"
    spec.write_bytes(b"\xef\xbb\xbf" + SPEC_TEXTS[0].encode())
    assert read_scenario(race).steps == parse_scenario(RACE_TEXTS[0]).steps
    assert [s.sql for s in read_spec(spec).steps] == [s.sql for s in parse_spec(SPEC_TEXTS[0]).steps]
    assert parse_scenario("\ufeff" + RACE_TEXTS[0]).title == parse_scenario(RACE_TEXTS[0]).title


def _not_files(tmp_path: Path) -> dict[str, Path]:
    fifo = tmp_path / "fifo.race"
    os.mkfifo(fifo)
    huge = tmp_path / "huge.spec"
    with open(huge, "wb") as fh:
        fh.truncate(6 * 1024**3)  # sparse: no disk used
    folder = tmp_path / "folder.race"
    folder.mkdir()
    return {"fifo": fifo, "zero": Path("/dev/zero"), "directory": folder, "huge": huge}


@pytest.mark.parametrize("kind, says", [("fifo", "not a regular file (a FIFO)"),
                                        ("zero", "not a regular file (a character device)"),
                                        ("directory", "not a regular file (a directory)"),
                                        ("huge", "too large")])
def test_only_regular_files_of_sane_size_are_read(tmp_path, kind, says):
    from lockrace.scenario.library import load, resolve

    path = _not_files(tmp_path)[kind]
    for call in (lambda: resolve(str(path)), lambda: load(path), lambda: read_spec(path), lambda: read_scenario(path)):
        err = check_outcome(call, str(path))
        assert isinstance(err, ScenarioError) and says in err.message, err


@pytest.mark.parametrize("kind, says", [("fifo", "not a regular file (a FIFO)"),
                                        ("zero", "not a regular file (a character device)"),
                                        ("huge", "too large")])
def test_expected_output_files_are_read_the_same_careful_way(tmp_path, kind, says):
    """``--expected`` once read a FIFO or /dev/zero without end."""
    from lockrace.isolation.cli import compare

    matched, diff = compare(b"starting permutation: s1\n", [_not_files(tmp_path)[kind]])
    assert not matched and says in diff, diff


def test_not_files_through_lockrace_run(tmp_path):
    """One line, exit 2, promptly -- a FIFO with no writer and /dev/zero once hung the run."""
    import subprocess
    import sys

    from support.cli import REPO as ROOT
    from support.cli import lockrace_env

    for kind, path in _not_files(tmp_path).items():
        out = subprocess.run([sys.executable, "-m", "lockrace", "run", str(path)], cwd=ROOT, env=lockrace_env(),
                             capture_output=True, text=True, timeout=30)
        lines = out.stderr.strip().splitlines()
        assert out.returncode == 2 and len(lines) == 1 and out.stdout == "", (kind, out)
        assert lines[0].startswith(f"lockrace: {path}: "), (kind, lines)


def _big_spec(steps: int) -> str:
    return ("session s1\n" + "".join(f"step s{i} {{ SELECT {i}; }}\n" for i in range(steps))
            + "session s2\nstep t { SELECT 0; }\n")


def _peak_bytes_reading(text: str):
    import tracemalloc

    tracemalloc.start()
    try:
        with watchdog(60):
            scenario = parse_spec(text, "big.spec")
        return scenario, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_reading_a_big_spec_is_linear():
    """One session of 3000 steps beside a one-step session, no permutation lines:
    3001 interleavings of 3001 steps.  Reading it once built all nine million
    entries (48 s, 1.5 GB); the reader now builds each interleaving when it is
    run, so memory grows with the file, not with its square.  (Bounds on
    memory, not time; bench/spec_read.py prints both.)"""
    _, small = _peak_bytes_reading(_big_spec(300))
    _, four_times = _peak_bytes_reading(_big_spec(1200))
    assert four_times < 6 * small, (small, four_times)  # linear: ~4x; quadratic: ~16x
    text = _big_spec(3000)
    assert 70_000 < len(text.encode()) < 90_000
    scenario, peak = _peak_bytes_reading(text)
    assert peak < 40 * len(text), peak  # ~2.4 MB here; all interleavings built: ~1400 MB
    perms = scenario.permutations
    assert len(perms) == 3001
    # upstream's order: session 1's next step first
    assert [e.step for e in perms[0]] == [f"s{i}" for i in range(3000)] + ["t"]
    assert [e.step for e in perms[1]] == [f"s{i}" for i in range(2999)] + ["t", "s2999"]
    assert [e.step for e in perms[-1]] == ["t"] + [f"s{i}" for i in range(3000)]
    walk = iter(perms)
    assert [[e.step for e in next(walk)] for _ in range(3)] == [[e.step for e in perms[k]] for k in range(3)]


# ------------------------------------------------------------------ the command line


@pytest.mark.parametrize("value", ["0", "-1", "-0.5", "nan", "inf", "-inf", "1e999", "soon"])
def test_step_timeout_must_be_positive_and_finite(value, capsys):
    from lockrace.cli import build_parser

    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(["run", "pg-nowait", f"--step-timeout={value}"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "--step-timeout" in err and "seconds" in err and "Traceback" not in err, err
    assert build_parser().parse_args(["run", "pg-nowait", "--step-timeout", "0.25"]).step_timeout == 0.25
