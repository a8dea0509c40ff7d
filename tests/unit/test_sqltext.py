"""The SQL lexer: comments and literals are never keywords; statements split as the server splits them."""

import pytest

from lockrace.core.sqltext import SQLTextError, has_call, statements, tokens, try_statements, words


def _words(sql, dialect="postgres"):
    return [words(s) for s in statements(sql, dialect)]


def test_comments_and_strings_hide_keywords():
    assert _words("SELECT 1 /* PREPARE TRANSACTION 'x' */") == [("SELECT",)]
    assert _words("SELECT 1 -- ; PREPARE TRANSACTION 'x'\n; COMMIT") == [("SELECT",), ("COMMIT",)]
    assert _words("SELECT ';' ; ALTER /* x */ SYSTEM SET work_mem = '7MB'") == [("SELECT",), ("ALTER", "SYSTEM", "SET", "WORK_MEM")]
    assert _words("/* a /* nested */ still a comment */ SELECT 1") == [("SELECT",)]


def test_string_literals_are_decoded():
    def strings(sql, dialect="postgres"):
        return [t.value for t in tokens(sql, dialect) if t.kind == "string"]
    assert strings("PREPARE TRANSACTION 'it''s'") == ["it's"]
    assert strings(r"PREPARE TRANSACTION E'a\'b\\c'") == ["a'b\\c"]
    assert strings("SELECT $x$semi;colon$x$, $$two$$") == ["semi;colon", "two"]
    assert strings("XA PREPARE 'a\\'b', \"q\"", "mysql") == ["a'b", "q"]
    assert strings(r"SELECT 'a\b'") == [r"a\b"]  # standard_conforming_strings: a plain backslash


def test_mysql_comments():
    assert _words("SELECT 1 # ; DROP DATABASE x\n", "mysql") == [("SELECT",)]
    assert _words("/*!50000 SET GLOBAL x = 1 */", "mysql") == [("SET", "GLOBAL", "X")]
    assert _words("SELECT `a;b` FROM t", "mysql") == [("SELECT",)]


def test_unterminated_text_is_said_not_guessed():
    with pytest.raises(SQLTextError):
        statements("SELECT 'open")
    assert try_statements("SELECT /* open") is None


def test_calls():
    (plain,) = statements("SELECT id FROM jobs WHERE id IN (1, 2) ORDER BY id FOR UPDATE SKIP LOCKED")
    (call,) = statements("SELECT claim(id), nextval('tickets') FROM jobs FOR UPDATE SKIP LOCKED")
    (seq,) = statements("SELECT NEXT VALUE FOR s, id FROM jobs FOR UPDATE SKIP LOCKED", "mysql")
    assert not has_call(plain) and has_call(call) and has_call(seq)
