"""Completion of the sandbox's table and column names (Ctrl+Space in a panel's input
line; Tab stays the key that switches panels).  The names come from the SQL that
made the sandbox: the scenario's setup and the CREATE TABLE / ALTER TABLE ... ADD
statements typed in this race that succeeded.  Nothing is asked of the server."""

from __future__ import annotations

import re

_CREATE = re.compile(r"\bCREATE\s+(?:TEMP(?:ORARY)?\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?[`\"]?(\w+)[`\"]?\s*\(",
                     re.IGNORECASE)
_ADD = re.compile(r"\bALTER\s+TABLE\s+[`\"]?(\w+)[`\"]?\s+ADD\s+(?:COLUMN\s+)?(?:IF\s+NOT\s+EXISTS\s+)?[`\"]?(\w+)",
                  re.IGNORECASE)
_NOT_A_COLUMN = {"primary", "constraint", "unique", "foreign", "check", "index", "key", "exclude", "like"}
_WORD_BEFORE = re.compile(r"[A-Za-z_][A-Za-z_0-9$]*$")


def _columns(body: str) -> list[str]:
    """The column names in a CREATE TABLE's parenthesised list (up to its closing parenthesis)."""
    cols, depth, part = [], 0, ""
    for ch in body:
        if ch == "(":
            depth += 1
        elif ch == ")":
            if depth == 0:
                break
            depth -= 1
        if ch == "," and depth == 0:
            cols.append(part)
            part = ""
            continue
        part += ch
    cols.append(part)
    out = []
    for col in cols:
        words = col.strip().split()
        if words and words[0].lower() not in _NOT_A_COLUMN:
            out.append(words[0].strip('`"'))
    return out


class SandboxNames:
    """Table name -> its column names, in the order they were made."""

    def __init__(self):
        self.tables: dict[str, list[str]] = {}

    def read(self, sql: str) -> None:
        for m in _CREATE.finditer(sql):
            self.tables[m.group(1)] = _columns(sql[m.end():])
        for m in _ADD.finditer(sql):
            cols = self.tables.setdefault(m.group(1), [])
            if m.group(2) not in cols and m.group(2).lower() not in _NOT_A_COLUMN:
                cols.append(m.group(2))

    def names(self) -> list[str]:
        out = list(self.tables)
        for cols in self.tables.values():
            out += [c for c in cols if c not in out]
        return out


def complete(text: str, cursor: int, names: list[str]) -> tuple[str, int, list[str]]:
    """Complete the word before ``cursor``: (new text, new cursor, the names it could be).
    One name: completed (and a space after it); several: their common beginning."""
    m = _WORD_BEFORE.search(text[:cursor])
    prefix = m.group() if m else ""
    start = cursor - len(prefix)
    choices = [n for n in names if n.lower().startswith(prefix.lower()) and n.lower() != prefix.lower()] \
        if prefix else list(names)
    if not choices:
        return text, cursor, []
    if len(choices) == 1:
        word = choices[0] + " "
    else:
        word = choices[0]
        for other in choices[1:]:
            while not other.lower().startswith(word.lower()):
                word = word[:-1]
        word = prefix + word[len(prefix):] if len(word) >= len(prefix) else prefix
    return text[:start] + word + text[cursor:], start + len(word), choices
