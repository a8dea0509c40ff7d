"""lockrace's own scenario format (``.race``): read and write.

The format stays close to a psql session transcript so that a person can read and
write it by hand::

    title: NOWAIT: fail fast
    engines: postgres
    lesson:
        Can this locking read acquire the required row locks without waiting?
    setup:
        CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL);
        INSERT INTO accounts VALUES (1, 100);
    teardown:
        DROP TABLE IF EXISTS accounts;

    A> BEGIN;
    A> SELECT id FROM accounts WHERE id = 1 FOR UPDATE;
        rows: 1
    B> SELECT id FROM accounts WHERE id = 1 FOR UPDATE NOWAIT;  -- refused at once
        expect: refused
        code: 55P03
        code[mariadb]: 1205
    note: Once A is done, the same statement succeeds.
    A> COMMIT;

Header keys are ``title``, ``engines``, ``nodes``, ``source``, ``lesson``,
``setup`` and ``teardown`` (the last two may carry a flavor: ``setup[mysql]:``).
``engines`` may name a cluster (``galera``, ``postgres-standby``), and
``nodes: A=node1 C=node2`` then pins sessions to its nodes.  A value
may follow the colon or continue on indented lines.  A step starts with
``NAME> `` at the left margin and runs until a line ending in ``;``.  Indented
``key: value`` lines after a step are its expectations (see ``EXPECT_KEYS``);
``key[flavor]:`` limits one to postgres, mysql (MariaDB and MySQL), mariadb or
mysql8.  ``note:`` lines narrate between steps.  ``#`` starts a comment line.

``A[postgres]> ...;`` directly followed by ``A[mysql]> ...;`` is one step with
its SQL per engine (``Step.variants``).  ``one-of: 5, 7 expect deadlock`` at the
left margin expects exactly one of those steps to end that way
(``Scenario.across``).
"""

from __future__ import annotations

import re
from pathlib import Path

from .errors import ScenarioError, printable, read_source
from ..registry import CLUSTER_ENGINES, ENGINE_NAMES as ENGINES, FLAVORS, Family, Flavor, engine as engine_spec
from .expectations import BY_WORD, KEYS, OUTCOMES, BadValue
from .model import AcrossSteps, Expectation, Scenario, Step

HEADER_KEYS = ("title", "engines", "nodes", "source", "lesson", "setup", "teardown")
EXPECT_KEYS = {spec.word: spec.name for spec in KEYS.values()}
"""The words an indented ``key:`` line may use (see ``expectations.KEYS``) -> ``Expectation.key``."""

_STEP_RE = re.compile(r"^([A-Za-z][A-Za-z0-9_]{0,15})(?:\[([a-z0-9]+)\])?>\s?(.*)$")
_ONE_OF_RE = re.compile(r"^([0-9]+(?:\s*,\s*[0-9]+)+)\s+expect\s+([a-z_]+)$")
_KEY_RE = re.compile(r"^([a-z][a-z-]*)(?:\[([a-z0-9]+)\])?:\s?(.*)$")


def read_scenario(path: str | Path) -> Scenario:
    path = Path(path)
    return parse_scenario(read_source(path), path=path, name=path.stem)


def parse_scenario(text: str, *, path: str | Path | None = None, name: str = "scenario") -> Scenario:
    return _Parser(text, path, name).parse()


class _Parser:
    def __init__(self, text: str, path, name: str):
        self.lines = text.removeprefix("\ufeff").splitlines()  # a byte-order mark is no content
        self.path = path
        self.scenario = Scenario(name=name, engines=[], path=Path(path) if path else None)
        self.i = 0

    def error(self, lineno: int | None, message: str) -> ScenarioError:
        return ScenarioError(self.path, lineno, message)

    def parse(self) -> Scenario:
        sc = self.scenario
        pending_note: list[str] = []
        seen_header: set[str] = set()
        for lineno, line in enumerate(self.lines, start=1):
            if "\x00" in line:
                # libpq and the MySQL protocol would cut the SQL there: refuse it
                raise self.error(lineno, "NUL byte (\\0) in the file: SQL cannot carry it (the server would see "
                                         "the statement cut short there)")
        while self.i < len(self.lines):
            raw = self.lines[self.i]
            lineno = self.i + 1
            self.i += 1
            stripped = raw.strip()
            if not stripped or stripped.startswith("#"):
                continue
            if raw[0] in " \t":
                if sc.steps:
                    self._expectation(sc.steps[-1], stripped, lineno)
                    continue
                raise self.error(lineno, "indented line outside a header block or step")
            m = _STEP_RE.match(raw)
            if m and not _KEY_RE.match(raw):
                session, flavor = m.group(1), m.group(2)
                if flavor is not None and flavor not in FLAVORS:
                    raise self.error(lineno, f"unknown flavor '{flavor}' (known: {', '.join(FLAVORS)})")
                step = self._step(session, m.group(3), lineno)
                last = sc.steps[-1] if sc.steps else None
                if flavor is not None and last is not None and last.variants and last.session == session \
                        and not last.expectations and not pending_note and flavor not in last.variants:
                    # A[postgres]> ...;  A[mysql]> ...;  one step, its SQL per engine
                    last.variants[flavor] = step.sql
                    if step.comment and not last.comment:
                        last.comment = step.comment
                    continue
                if flavor is not None:
                    step.variants[flavor] = step.sql
                step.note = "\n".join(pending_note)
                pending_note = []
                sc.steps.append(step)
                continue
            km = _KEY_RE.match(raw)
            if not km:
                raise self.error(lineno, f"expected 'key: value' or a step 'A> SQL;', got {stripped[:40]!r}")
            key, flavor, value = km.group(1), km.group(2), km.group(3).strip()
            if key == "steps":
                continue
            if key == "note":
                pending_note.append(self._block(value))
                continue
            if key == "one-of":
                self._one_of(value, flavor, lineno)
                continue
            if key not in HEADER_KEYS:
                if key in EXPECT_KEYS:
                    raise self.error(lineno, f"'{key}:' must be indented under a step")
                raise self.error(lineno, f"unknown key '{key}' (known: {', '.join(HEADER_KEYS + ('note',))})")
            if sc.steps:
                raise self.error(lineno, f"'{key}:' must come before the first step")
            if flavor is not None and key not in ("setup", "teardown"):
                raise self.error(lineno, f"'{key}' takes no [flavor]")
            if flavor is not None and flavor not in FLAVORS:
                raise self.error(lineno, f"unknown flavor '{flavor}' (known: {', '.join(FLAVORS)})")
            tag = f"{key}[{flavor}]" if flavor else key
            if tag in seen_header:
                raise self.error(lineno, f"'{tag}:' given twice")
            seen_header.add(tag)
            block = self._block(value)
            if key == "title":
                sc.title = block
            elif key == "source":
                sc.source = block
            elif key == "lesson":
                sc.lesson = block
            elif key == "engines":
                engines = [e.strip() for e in re.split(r"[,\s]+", block) if e.strip()]
                bad = [e for e in engines if e not in ENGINES]
                if bad or not engines:
                    raise self.error(lineno, f"engines must be among {', '.join(ENGINES)}, got {block!r}")
                sc.engines = engines
            elif key == "nodes":
                sc.nodes = self._nodes(block, lineno)
            else:
                target = sc.setup if key == "setup" else sc.teardown
                target[flavor] = [block] if block else []
        if pending_note:
            sc.epilogue = "\n".join(pending_note)
        if not sc.steps:
            raise self.error(len(self.lines) or None, "no steps: a scenario needs at least one 'A> SQL;' line")
        if not sc.engines:
            raise self.error(1, f"missing 'engines:' ({', '.join(ENGINES)})")
        self._check_references()
        self._check_variants()
        self._check_nodes()
        for name in sc.session_names():
            sc.session(name)
        return sc

    def _block(self, first: str) -> str:
        """A value: the rest of the line plus following indented lines."""
        parts = [first] if first else []
        indent: int | None = None
        while self.i < len(self.lines):
            raw = self.lines[self.i]
            if raw.strip() == "":
                # a blank line inside a block continues it only if more indented lines follow
                j = self.i
                while j < len(self.lines) and not self.lines[j].strip():
                    j += 1
                if j < len(self.lines) and self.lines[j][:1] in (" ", "\t"):
                    parts.extend([""] * (j - self.i))
                    self.i = j
                    continue
                break
            if raw[0] not in " \t":
                break
            width = len(raw) - len(raw.lstrip())
            indent = width if indent is None else min(indent, width)
            parts.append(raw[indent:].rstrip())
            self.i += 1
        return "\n".join(parts).strip("\n")

    def _step(self, session: str, rest: str, lineno: int) -> Step:
        sql_lines = [rest]
        while not _statement_ends(sql_lines[-1]):
            if self.i >= len(self.lines):
                raise self.error(lineno, f"step for session {session} never ends: missing ';'")
            nxt = self.lines[self.i]
            if not nxt.strip():
                raise self.error(lineno, f"step for session {session} is not terminated with ';' before a blank line")
            if _KEY_RE.match(nxt.strip()) and nxt.strip().split(":")[0].split("[")[0] in EXPECT_KEYS:
                raise self.error(lineno, f"step for session {session} is not terminated with ';'")
            sql_lines.append(nxt.rstrip())
            self.i += 1
        sql_lines[-1], comment = _split_comment(sql_lines[-1])
        sql = "\n".join(sql_lines).strip()
        if sql in ("", ";"):
            raise self.error(lineno, "empty statement")
        return Step(
            name=str(len(self.scenario.steps) + 1),
            session=session,
            sql=sql,
            comment=comment,
            line=lineno,
        )

    def _expectation(self, step: Step, text: str, lineno: int) -> None:
        km = _KEY_RE.match(text)
        if not km:
            raise self.error(lineno, f"expected an indented 'key: value' under step {step.name}, got {text[:40]!r}")
        key, flavor, value = km.group(1), km.group(2), km.group(3).strip()
        if key not in EXPECT_KEYS:
            raise self.error(lineno, f"unknown expectation '{key}' (known: {', '.join(EXPECT_KEYS)})")
        if flavor is not None and flavor not in FLAVORS:
            raise self.error(lineno, f"unknown flavor '{flavor}' (known: {', '.join(FLAVORS)})")
        spec = BY_WORD[key]
        try:
            parsed = spec.parse(value, len(self.scenario.steps))
        except BadValue as exc:
            raise self.error(lineno, str(exc)) from None
        if spec.accumulates:
            for exp in step.expectations:
                if exp.key == spec.name and exp.flavor == flavor:
                    assert isinstance(exp.value, list) and isinstance(parsed, list)
                    exp.value.extend(parsed)
                    return
        step.expectations.append(Expectation(spec.name, parsed, flavor, lineno))

    def _one_of(self, value: str, flavor: str | None, lineno: int) -> None:
        if flavor is not None and flavor not in FLAVORS:
            raise self.error(lineno, f"unknown flavor '{flavor}' (known: {', '.join(FLAVORS)})")
        m = _ONE_OF_RE.match(value)
        if not m:
            raise self.error(lineno, f"one-of: expected 'STEP, STEP expect OUTCOME' (e.g. '5, 7 expect deadlock'),"
                                     f" got {value[:40]!r}")
        steps = [s.strip() for s in m.group(1).split(",")]
        outcome = m.group(2)
        if outcome not in OUTCOMES:
            raise self.error(lineno, f"unknown outcome '{printable(outcome)}' (known: {', '.join(OUTCOMES)})")
        if len(set(steps)) != len(steps):
            raise self.error(lineno, "one-of: a step is named twice")
        self.scenario.across.append(AcrossSteps(steps, outcome, flavor, lineno))

    def _check_variants(self) -> None:
        """A step with per-engine SQL needs a variant for every engine the scenario runs on."""
        for step in self.scenario.steps:
            if not step.variants:
                continue
            for engine in self.scenario.engines:
                postgres = engine_spec(engine).family == Family.POSTGRES
                flavors = [Flavor.POSTGRES] if postgres else [Flavor.MARIADB, Flavor.MYSQL8]
                for flavor in flavors:
                    if step.sql_for(flavor) is None:
                        raise self.error(step.line, f"step {step.name} has per-engine SQL but none for {flavor}"
                                                    f" (add {step.session}[{engine_spec(engine).family}]> ...;)")

    def _nodes(self, block: str, lineno: int) -> dict[str, str]:
        """``A=node1 B=node1 C=node2`` (spaces or commas between pairs)."""
        out: dict[str, str] = {}
        for pair in (p for p in re.split(r"[,\s]+", block) if p):
            m = re.fullmatch(r"([A-Za-z][A-Za-z0-9_]{0,15})=([a-z][a-z0-9_-]{0,30})", pair)
            if not m:
                raise self.error(lineno, f"nodes: expected SESSION=NODE pairs (A=node1 C=node2), got {pair!r}")
            if m.group(1) in out:
                raise self.error(lineno, f"nodes: session {m.group(1)} placed twice")
            out[m.group(1)] = m.group(2)
        if not out:
            raise self.error(lineno, "nodes: needs SESSION=NODE pairs (A=node1 C=node2)")
        self.nodes_line = lineno
        return out

    def _check_nodes(self) -> None:
        sc = self.scenario
        if not sc.nodes:
            return
        line = getattr(self, "nodes_line", None)
        clusters = [e for e in sc.engines if e in CLUSTER_ENGINES]
        if not clusters:
            raise self.error(line, f"nodes: applies to cluster engines ({', '.join(CLUSTER_ENGINES)}), "
                                   f"not {', '.join(sc.engines)}")
        names = set(sc.session_names())
        for session, node in sc.nodes.items():
            if session not in names:
                raise self.error(line, f"nodes: no session named {session}")
            for engine in clusters:
                nodes = engine_spec(engine).nodes
                if node not in nodes:
                    raise self.error(line, f"nodes: {engine} has no node {node!r} "
                                           f"(its nodes: {', '.join(nodes)})")

    def _check_references(self) -> None:
        count = len(self.scenario.steps)
        names = set(self.scenario.session_names())
        for across in self.scenario.across:
            for name in across.steps:
                if not 1 <= int(name) <= count:
                    raise self.error(across.line, f"one-of: no step {name} (steps are 1 to {count})")
        for step in self.scenario.steps:
            for exp in step.expectations:
                problem = KEYS[exp.key].reference_problem(exp.value, int(step.name), count, names)
                if problem:
                    raise self.error(exp.line, problem)


def _split_comment(line: str) -> tuple[str, str]:
    """Split a trailing ``-- comment`` off the last line of a statement."""
    in_quote = False
    for idx, ch in enumerate(line):
        if ch == "'":
            in_quote = not in_quote
        elif not in_quote and line.startswith("--", idx):
            return line[:idx].rstrip(), line[idx + 2 :].strip()
    return line.rstrip(), ""


def _statement_ends(line: str) -> bool:
    body, _ = _split_comment(line)
    return body.rstrip().endswith(";")


# --------------------------------------------------------------------- writer


def write_scenario(sc: Scenario) -> str:
    """Render a Scenario in the ``.race`` format; ``parse_scenario`` reads it back."""
    out: list[str] = []
    if sc.title:
        out.extend(_value("title", sc.title))  # a title may run over several lines
    out.append(f"engines: {', '.join(sc.engines)}")
    if sc.nodes:
        out.append("nodes: " + " ".join(f"{k}={v}" for k, v in sc.nodes.items()))
    if sc.source:
        out.extend(_value("source", sc.source))
    if sc.lesson:
        out.extend(_value("lesson", sc.lesson, force_block=True))
    for key, blocks in (("setup", sc.setup), ("teardown", sc.teardown)):
        for flavor, sqls in blocks.items():
            tag = f"{key}[{flavor}]" if flavor else key
            out.extend(_value(tag, "\n".join(sqls), force_block=True))
    out.append("")
    for step in sc.steps:
        if step.note:
            out.extend(_value("note", step.note))
        variants: list[tuple[str | None, str]] = list(step.variants.items()) or [(None, step.sql)]
        for n, (flavor, text) in enumerate(variants):
            sql = text if text.rstrip().endswith(";") else text.rstrip() + ";"
            first, *rest = sql.splitlines()
            comment = f"  -- {step.comment}" if step.comment and n == 0 else ""
            prompt = f"{step.session}[{flavor}]>" if flavor else f"{step.session}>"
            if rest:
                out.append(f"{prompt} {first}")
                out.extend(rest[:-1])
                out.append(rest[-1] + comment)
            else:
                out.append(f"{prompt} {first}{comment}")
        for exp in step.expectations:
            spec = KEYS[exp.key]
            scope = f"[{exp.flavor}]" if exp.flavor else ""
            out.extend(f"    {spec.word}{scope}: {line}" for line in spec.lines(exp.value))
    for across in sc.across:
        out.append(across.describe())
    if sc.epilogue:
        out.extend(_value("note", sc.epilogue))
    return "\n".join(out) + "\n"


def _value(key: str, text: str, force_block: bool = False) -> list[str]:
    lines = text.splitlines() or [""]
    if len(lines) == 1 and not force_block:
        return [f"{key}: {lines[0]}"]
    return [f"{key}:"] + [("    " + line) if line else "" for line in lines]
