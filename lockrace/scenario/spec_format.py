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
from dataclasses import dataclass
from pathlib import Path

from .errors import ScenarioError, read_source
from .model import Blocker, PermutationEntry, Scenario, SessionDef, Step

MAX_INTERLEAVINGS = 100_000

_KEYWORDS = {"notices", "permutation", "session", "setup", "step", "teardown"}
_SPACE = " \t\r\f"
_IDENT_START = re.compile(r"[A-Za-z_\x80-\U0010ffff]")
_IDENT = re.compile(r"[A-Za-z_\x80-\U0010ffff][A-Za-z0-9_$\x80-\U0010ffff]*")
_ENGINES = re.compile(r"^#\s*engines:\s*([a-z, ]+)\s*$", re.MULTILINE)


@dataclass
class Token:
    kind: str  # keyword | ident | sql | int | punct | eof
    value: str
    line: int


def tokenize(text: str, path) -> list[Token]:
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
            tokens.append(Token("int", m.group(0), line))
            i = m.end()
        elif _IDENT_START.match(ch):
            m = _IDENT.match(text, i)
            word = m.group(0)
            kind = "keyword" if word in _KEYWORDS else "ident"
            tokens.append(Token(kind, word, line))
            i = m.end()
        elif ch in ",()*":
            tokens.append(Token("punct", ch, line))
            i += 1
        else:
            raise ScenarioError(path, line, f'syntax error: unexpected character "{ch}"')
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


def _all_interleavings(sessions: list[list[str]], path) -> list[list[PermutationEntry]]:
    """Every ordering that keeps each session's steps in order, in upstream's
    order (recursively pick the next step of session 1, then of session 2, ...)."""
    from math import factorial

    total = factorial(sum(len(s) for s in sessions))
    for s in sessions:
        total //= factorial(len(s))
    if total > MAX_INTERLEAVINGS:
        raise ScenarioError(path, None, f"no permutation given and {total} interleavings is too many to run")
    # Depth-first, trying session 1's next step first (upstream's recursion
    # order), with an explicit stack: a session with thousands of steps has a
    # single interleaving, which must not exhaust Python's recursion limit.
    out: list[list[PermutationEntry]] = []
    stack: list[tuple[list[int], list[str]]] = [([0] * len(sessions), [])]
    while stack:
        piles, chosen = stack.pop()
        ready = [i for i, steps in enumerate(sessions) if piles[i] < len(steps)]
        if not ready:
            out.append([PermutationEntry(name) for name in chosen])
            continue
        for i in reversed(ready):
            nxt = list(piles)
            nxt[i] += 1
            stack.append((nxt, chosen + [sessions[i][piles[i]]]))
    return out


def parse_spec(text: str, path: str | Path = "<input>", name: str | None = None) -> Scenario:
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
    while p.at("keyword", "session"):
        p.take()
        sname = p.name("a session name")
        sdef = SessionDef(sname.value)
        if any(s.name == sname.value for s in sessions):
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
                            blocker.notices = int(p.expect("int", "a number after notices").value)
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
    if not explicit:
        permutations = _all_interleavings(session_steps, path)
    engines = ["postgres"]
    m = _ENGINES.search(text)
    if m:
        engines = [e.strip() for e in m.group(1).split(",") if e.strip()]
        bad = [e for e in engines if e not in ("postgres", "mysql")]
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
        permutations=permutations,
        path=Path(path) if path != "<input>" else None,
        kind="isolation-spec",
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
