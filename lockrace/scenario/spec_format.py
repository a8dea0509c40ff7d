"""Reader for PostgreSQL isolation-test specs (``src/test/isolation/specs``).

The grammar, as upstream's isolationtester accepts it::

    setup { SQL }            (any number; run in order before each permutation)
    teardown { SQL }         (at most one)
    session NAME             (one or more)
      setup { SQL }          (optional)
      step NAME { SQL }      (one or more)
      teardown { SQL }       (optional)
    permutation ENTRY ...    (any number; none = every interleaving)

A permutation entry is a step name, optionally followed by blockers in
parentheses: ``step(*)``, ``step(other)``, ``step(other notices 2)``, several
separated by commas.  ``#`` starts a comment outside SQL blocks; names may be
double-quoted (``""`` is a quote inside).  An SQL block keeps its text
verbatim except that spaces and tabs right after ``{`` and right before ``}``
are dropped (not newlines), which is what the transcript shows after
``step NAME:``.

lockrace extension: a comment line ``# engines: mysql`` (or ``postgres, mysql``)
declares which engines the spec is written for (default: postgres).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from .errors import ScenarioError, printable, read_source
from ..registry import SINGLE_ENGINES, Engine
from .model import Blocker, PermutationEntry, Scenario, ScenarioKind, SessionDef, Step

MAX_INTERLEAVINGS = 100_000

_KEYWORDS = {"notices", "permutation", "session", "setup", "step", "teardown"}
_SPACE = " \t\r\f"
_IDENT_START = re.compile(r"[A-Za-z_\x80-\U0010ffff]")
_IDENT = re.compile(r"[A-Za-z_\x80-\U0010ffff][A-Za-z0-9_$\x80-\U0010ffff]*")
_ENGINES = re.compile(r"^#\s*engines:\s*([a-z, -]+)\s*$", re.MULTILINE)


@dataclass
class Token:
    kind: str  # keyword | ident | sql | int | punct | eof
    value: str
    line: int


def tokenize(text: str, path) -> list[Token]:
    nul = text.find("\x00")
    if nul >= 0:
        # libpq ends the SQL at a NUL: "DELETE FROM t\0 WHERE x = 1" would delete every row
        raise ScenarioError(path, text.count("\n", 0, nul) + 1,
                            "NUL byte (\\0) in the file: SQL cannot carry it (the server would see the "
                            "statement cut short there)")
    tokens: list[Token] = []
    i, line, n = 0, 1, len(text)
    while i < n:
        ch = text[i]
        if ch == "\n":
            line += 1
            i += 1
        elif ch in _SPACE:
            i += 1
        elif ch == "#":
            while i < n and text[i] not in "\n\r":
                i += 1
        elif ch == "{":
            start_line = line
            i += 1
            while i < n and text[i] in _SPACE:
                i += 1
            start = i
            while i < n and text[i] != "}":
                if text[i] == "\n":
                    line += 1
                i += 1
            if i >= n:
                raise ScenarioError(path, start_line, "unterminated sql block")
            end = i
            while end > start and text[end - 1] in _SPACE:
                end -= 1
            tokens.append(Token("sql", text[start:end], start_line))
            i += 1
        elif ch == '"':
            start_line = line
            i += 1
            buf = []
            while True:
                if i >= n:
                    raise ScenarioError(path, start_line, "unterminated quoted identifier")
                c = text[i]
                if c == "\n":
                    raise ScenarioError(path, line, "unexpected newline in quoted identifier")
                if c == '"':
                    if i + 1 < n and text[i + 1] == '"':
                        buf.append('"')
                        i += 2
                        continue
                    i += 1
                    break
                buf.append(c)
                i += 1
            tokens.append(Token("ident", "".join(buf), start_line))
        elif ch.isdigit() and ch.isascii():
            m = re.compile(r"[0-9]+").match(text, i)
            assert m is not None  # text[i] is a digit
            tokens.append(Token("int", m.group(0), line))
            i = m.end()
        elif _IDENT_START.match(ch):
            m = _IDENT.match(text, i)
            assert m is not None  # text[i] starts an identifier
            word = m.group(0)
            kind = "keyword" if word in _KEYWORDS else "ident"
            tokens.append(Token(kind, word, line))
            i = m.end()
        elif ch in ",()*":
            tokens.append(Token("punct", ch, line))
            i += 1
        else:
            raise ScenarioError(path, line, f'syntax error: unexpected character "{printable(ch)}"')
    tokens.append(Token("eof", "", line))
    return tokens


class _Parser:
    def __init__(self, tokens: list[Token], path):
        self.tokens = tokens
        self.pos = 0
        self.path = path

    def peek(self) -> Token:
        return self.tokens[self.pos]

    def take(self) -> Token:
        tok = self.tokens[self.pos]
        self.pos += 1
        return tok

    def at(self, kind: str, value: str | None = None) -> bool:
        tok = self.peek()
        return tok.kind == kind and (value is None or tok.value == value)

    def expect(self, kind: str, what: str, value: str | None = None) -> Token:
        tok = self.peek()
        if not self.at(kind, value):
            found = "end of file" if tok.kind == "eof" else repr(tok.value if tok.kind != "sql" else "{ ... }")
            raise ScenarioError(self.path, tok.line, f"syntax error: expected {what}, found {found}")
        return self.take()

    def name(self, what: str) -> Token:
        # "notices" is only a keyword inside blockers; elsewhere it can name things
        if self.at("keyword", "notices"):
            return self.take()
        return self.expect("ident", what)


class Interleavings(Sequence[list[PermutationEntry]]):
    """Every ordering that keeps each session's steps in order, in upstream's
    order (recursively pick the next step of session 1, then of session 2, ...).

    Built on demand: reading a spec costs time and memory linear in its size,
    even when it has thousands of steps (a session of 3000 steps beside a
    one-step session has 3001 interleavings of 3001 steps each -- nine million
    entries if they were all built up front).  ``self[k]`` builds the k-th one.
    """

    def __init__(self, sessions: list[list[str]], total: int):
        self._sessions = [list(names) for names in sessions]
        self._total = total

    def __len__(self) -> int:
        return self._total

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._total))]
        if index < 0:
            index += self._total
        if not 0 <= index < self._total:
            raise IndexError("interleaving index out of range")
        left = [len(names) for names in self._sessions]
        remaining = sum(left)
        count = self._total  # interleavings of what is left
        out: list[PermutationEntry] = []
        while remaining:
            for i, n in enumerate(left):
                if not n:
                    continue
                # those of them that start with session i's next step
                first = count * n // remaining
                if index < first:
                    out.append(PermutationEntry(self._sessions[i][len(self._sessions[i]) - n]))
                    left[i] -= 1
                    remaining -= 1
                    count = first
                    break
                index -= first
        return out

    def __iter__(self) -> Iterator[list[PermutationEntry]]:
        # Upstream's order is the lexicographic order of the sequences of
        # session numbers: step from one to the next (next permutation of a
        # multiset), O(steps) each.
        seq = [i for i, names in enumerate(self._sessions) for _ in names]
        n = len(seq)
        while True:
            taken = [0] * len(self._sessions)
            perm = []
            for i in seq:
                perm.append(PermutationEntry(self._sessions[i][taken[i]]))
                taken[i] += 1
            yield perm
            k = n - 2
            while k >= 0 and seq[k] >= seq[k + 1]:
                k -= 1
            if k < 0:
                return
            j = n - 1
            while seq[j] <= seq[k]:
                j -= 1
            seq[k], seq[j] = seq[j], seq[k]
            seq[k + 1:] = reversed(seq[k + 1:])


def _all_interleavings(sessions: list[list[str]], path) -> Interleavings:
    total = 1
    placed = 0
    for names in sessions:  # the multinomial coefficient, one session at a time
        for k in range(1, len(names) + 1):
            placed += 1
            total = total * placed // k
        if total > MAX_INTERLEAVINGS:
            raise ScenarioError(path, None, f"no permutation given and more than {MAX_INTERLEAVINGS} "
                                            "interleavings of its steps: too many to run")
    return Interleavings(sessions, total)


def parse_spec(text: str, path: str | Path = "<input>", name: str | None = None) -> Scenario:
    text = text.removeprefix("\ufeff")  # a byte-order mark is no content
    p = _Parser(tokenize(text, path), path)
    setups: list[str] = []
    teardown: list[str] = []
    while p.at("keyword", "setup"):
        p.take()
        setups.append(p.expect("sql", "an SQL block { ... } after setup").value)
    if p.at("keyword", "teardown"):
        p.take()
        teardown.append(p.expect("sql", "an SQL block { ... } after teardown").value)
    sessions: list[SessionDef] = []
    steps: list[Step] = []
    seen_steps: dict[str, int] = {}
    session_steps: list[list[str]] = []
    session_names: set[str] = set()
    while p.at("keyword", "session"):
        p.take()
        sname = p.name("a session name")
        sdef = SessionDef(sname.value)
        if sname.value in session_names:
            raise ScenarioError(path, sname.line, f"duplicate session name: {sname.value}")
        if p.at("keyword", "setup"):
            p.take()
            sdef.setup.append(p.expect("sql", "an SQL block { ... } after setup").value)
        names: list[str] = []
        while p.at("keyword", "step"):
            p.take()
            stok = p.name("a step name")
            sql = p.expect("sql", f"an SQL block {{ ... }} for step {stok.value}")
            if stok.value in seen_steps:
                raise ScenarioError(path, stok.line, f"duplicate step name: {stok.value}")
            seen_steps[stok.value] = stok.line
            steps.append(Step(name=stok.value, session=sname.value, sql=sql.value, line=stok.line))
            names.append(stok.value)
        if not names:
            raise ScenarioError(path, p.peek().line, f"session {sname.value} has no steps")
        if p.at("keyword", "teardown"):
            p.take()
            sdef.teardown.append(p.expect("sql", "an SQL block { ... } after teardown").value)
        sessions.append(sdef)
        session_names.add(sdef.name)
        session_steps.append(names)
    if not sessions:
        tok = p.peek()
        if p.at("keyword", "setup"):
            raise ScenarioError(path, tok.line, "syntax error: global setup blocks must come before teardown and sessions")
        raise ScenarioError(path, tok.line, "syntax error: expected a session")
    step_session = {s.name: s.session for s in steps}
    permutations: list[list[PermutationEntry]] = []
    while p.at("keyword", "permutation"):
        ptok = p.take()
        entries: list[PermutationEntry] = []
        lines: list[int] = []
        while p.at("ident") or p.at("keyword", "notices"):
            stok = p.take()
            if stok.value not in step_session:
                raise ScenarioError(path, stok.line, f'undefined step "{stok.value}" specified in permutation')
            entry = PermutationEntry(stok.value)
            if p.at("punct", "("):
                p.take()
                while True:
                    if p.at("punct", "*"):
                        p.take()
                        entry.blockers.append(Blocker(None))
                    else:
                        btok = p.name("a step name or * in the blocker list")
                        blocker = Blocker(btok.value)
                        if p.at("keyword", "notices"):
                            p.take()
                            count = p.expect("int", "a number after notices")
                            if len(count.value.lstrip("0")) > 9:
                                raise ScenarioError(path, count.line, f"notices {count.value[:20]}...: too large")
                            blocker.notices = int(count.value)
                        entry.blockers.append(blocker)
                    if p.at("punct", ","):
                        p.take()
                        continue
                    p.expect("punct", "',' or ')' in the blocker list", ")")
                    break
            entries.append(entry)
            lines.append(stok.line)
        if not entries:
            raise ScenarioError(path, ptok.line, "syntax error: permutation lists no steps")
        in_perm = {e.step for e in entries}
        for entry, line in zip(entries, lines):
            for b in entry.blockers:
                if b.step is None:
                    continue
                if b.step not in in_perm:
                    raise ScenarioError(path, line, f'undefined blocking step "{b.step}" referenced in '
                                                    f'permutation step "{entry.step}"')
                if step_session[b.step] == step_session[entry.step]:
                    raise ScenarioError(path, line, f'permutation step "{entry.step}" cannot block on its own session')
        permutations.append(entries)
    if not p.at("eof"):
        tok = p.peek()
        what = "{ ... }" if tok.kind == "sql" else tok.value
        raise ScenarioError(path, tok.line, f"syntax error at {what!r}: expected permutation or end of file")
    explicit = bool(permutations)
    order: Sequence[list[PermutationEntry]] = permutations if explicit else _all_interleavings(session_steps, path)
    engines = [Engine.POSTGRES.value]
    m = _ENGINES.search(text)
    if m:
        engines = [e.strip() for e in m.group(1).split(",") if e.strip()]
        bad = [e for e in engines if e not in SINGLE_ENGINES]
        if bad or not engines:
            raise ScenarioError(path, text[: m.start()].count("\n") + 1, f"unknown engine in '# engines:': {', '.join(bad)}")
    stem = name or (Path(path).stem if path != "<input>" else "spec")
    return Scenario(
        name=stem,
        title=f"isolation spec {stem}",
        engines=engines,
        source=text,
        setup={None: setups} if setups else {},
        teardown={None: teardown} if teardown else {},
        sessions=sessions,
        steps=steps,
        permutations=order,
        path=Path(path) if path != "<input>" else None,
        kind=ScenarioKind.ISOLATION_SPEC,
        explicit_permutations=explicit,
    )


def read_spec(path: str | Path) -> Scenario:
    path = Path(path)
    return parse_spec(read_source(path), path)


def unused_steps(sc: Scenario) -> list[str]:
    """Steps no explicit permutation uses, in upstream's (strcmp) order."""
    if not getattr(sc, "explicit_permutations", True) or not sc.permutations:
        return []
    used = {e.step for perm in sc.permutations for e in perm}
    return sorted((s.name for s in sc.steps if s.name not in used), key=lambda n: n.encode())
