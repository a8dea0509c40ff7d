"""Passwords never leave lockrace: redact() and the DSN errors, as properties
(hypothesis), and redact() reads every DSN as libpq and the MySQL clients do."""

from __future__ import annotations

from urllib.parse import quote

import pytest


from hypothesis import assume, given, settings
from hypothesis import strategies as st

from lockrace.servers.target import DsnError, parse_mysql_dsn, pg_target, redact

_PASSWORDS = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=6, max_size=24)
_SHAPES = [
    lambda pw: f"postgresql://someone:{quote(pw, safe='')}@db.example:5432/app",
    lambda pw: f"postgresql://someone:{pw}@db.example:5432/app",  # unencoded, as people type it
    lambda pw: "host=db.example port=5432 user=someone password='{}' dbname=app".format(
        pw.replace("\\", "\\\\").replace("'", "\\'")),
    lambda pw: f"host=db.example password={pw} user=someone",
    lambda pw: f"postgresql://db.example/app?user=someone&password={quote(pw, safe='')}",
    lambda pw: f"mysql://root:{pw}@db.example:3306",
    lambda pw: f"mysql://root:{quote(pw, safe='')}@db.example:notaport",
]


@settings(max_examples=300, derandomize=True, database=None, deadline=None)
@given(_PASSWORDS, st.sampled_from(range(len(_SHAPES))))
def test_redact_hides_any_password(password, shape):
    dsn = _SHAPES[shape](password)
    # only passwords that cannot be found in the rest of the text (e.g. not "mysql:")
    assume(password not in _SHAPES[shape]("\x00") and quote(password, safe="") not in _SHAPES[shape]("\x00"))
    if shape == 1:
        assume("/" not in password and "?" not in password and "#" not in password)
    if shape == 3:
        assume("'" not in password and "\\" not in password)
    shown = redact(dsn)
    assert password not in shown and quote(password, safe="") not in shown, (dsn, shown)


@settings(max_examples=100, derandomize=True, database=None, deadline=None)
@given(_PASSWORDS)
def test_dsn_errors_never_carry_the_password(password):
    """The DSN-parsing errors (no server involved) print the DSN redacted."""
    assume(all(password not in text for text in ("host=db.example password='", "mysql://root:@db.example:3306",
                                                  " is a MySQL DSN; give it with --mysql", "not a PostgreSQL DSN: ",
                                                  " (try postgresql://user@host:5432/dbname)", "notaport",
                                                  "not a MySQL DSN: ", " (try mysql://root@127.0.0.1:3306)")))
    for dsn in (f"host=db.example password='{password}", f"mysql://root:{password}@db.example:3306"):
        try:
            pg_target(dsn)
        except DsnError as exc:
            assert password not in str(exc), str(exc)
    try:
        parse_mysql_dsn(f"mysql://root:{password}@db.example:notaport")
    except DsnError as exc:
        assert password not in str(exc), str(exc)


# A real connection-string reader, checked against libpq's own: every DSN below
# is one libpq accepts (psycopg's conninfo_to_dict is PQconninfoParse), and
# after redaction libpq must read exactly the same connection parameters, with
# only the secrets turned into ***.

_LIBPQ_KEYS = ["host", "port", "dbname", "user", "application_name", "options", "sslmode", "connect_timeout"]
_SECRETS = ["password", "sslpassword"]
_VALUE = st.text(st.characters(min_codepoint=32, max_codepoint=0x2FF, exclude_categories=("Cs",)), max_size=14)
_SECRET = st.text(st.characters(min_codepoint=32, max_codepoint=0x2FF, exclude_categories=("Cs",)),
                  min_size=8, max_size=24)


def _quoted(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _bare(value: str) -> str:
    """libpq's unquoted value: a backslash escapes the next character (spaces, quotes, backslashes)."""
    if not value:
        return "''"
    return "".join("\\" + ch if ch in " \\'" else ch for ch in value)


def _encoded_key(draw, key: str) -> str:
    """The key with some of its characters percent-encoded (upper- or lower-case hex)."""
    out = []
    for ch in key:
        if draw(st.booleans()):
            code = f"%{ord(ch):02X}"
            out.append(code if draw(st.booleans()) else code.lower())
        else:
            out.append(ch)
    return "".join(out)


@st.composite
def _keyvalue_dsns(draw):
    """(dsn, the secret, the secret as written, the dsn without it)"""
    pairs = draw(st.lists(st.tuples(st.sampled_from(_LIBPQ_KEYS), _VALUE), max_size=5))
    secret = draw(_SECRET)
    at = draw(st.integers(0, len(pairs)))
    pairs.insert(at, (draw(st.sampled_from(_SECRETS)), "\x00"))
    written = draw(st.sampled_from([_quoted, _bare]))(secret)
    parts = []
    for key, value in pairs:
        shown = "\x00" if value == "\x00" else draw(st.sampled_from([_quoted, _bare]))(value)
        parts.append(key + draw(st.sampled_from(["=", " = ", "= ", " ="])) + shown)
    template = " ".join(parts)
    return template.replace("\x00", written), secret, written, template.replace("\x00", "")


@st.composite
def _uri_dsns(draw):
    """(dsn, the secret, the dsn without it)"""
    secret = draw(_SECRET)
    user = draw(st.text(st.characters(min_codepoint=97, max_codepoint=122), min_size=1, max_size=8))
    in_userinfo = draw(st.booleans())
    userinfo = f"{user}:\x00@" if in_userinfo else f"{user}@"
    params = [f"{_encoded_key(draw, key)}={quote(value, safe='')}"
              for key, value in draw(st.lists(st.tuples(st.sampled_from(_LIBPQ_KEYS), _VALUE), max_size=4))]
    if not in_userinfo:
        key = _encoded_key(draw, draw(st.sampled_from(_SECRETS)))
        params.insert(draw(st.integers(0, len(params))), f"{key}=\x00")
    scheme = draw(st.sampled_from(["postgresql://", "postgres://"]))
    query = ("?" + "&".join(params)) if params else ""
    template = f"{scheme}{userinfo}db.example:5432/app{query}"
    return template.replace("\x00", quote(secret, safe="")), secret, template.replace("\x00", "")


def _libpq_reads_the_same(dsn: str, shown: str) -> None:
    from psycopg.conninfo import conninfo_to_dict

    before, after = conninfo_to_dict(dsn), conninfo_to_dict(shown)
    expected = {k: "***" if k in _SECRETS else (redact(v) if ("=" in v or "://" in v) else v)
                for k, v in before.items()}
    assert after == expected, (dsn, shown)


@settings(max_examples=400, derandomize=True, database=None, deadline=None)
@given(_keyvalue_dsns())
def test_redact_reads_keyvalue_dsns_as_libpq_does(case):
    """Quoted values with escaped quotes and backslashes, unquoted values with
    backslash-escaped spaces (``password=Hunter2\\ Xylophone99``), spaces
    around '=': the secret never shows, everything else does, unchanged."""
    dsn, secret, written, rest = case
    assume(secret not in rest and written not in rest)
    shown = redact(dsn)
    assert secret not in shown and written not in shown, (dsn, shown)
    _libpq_reads_the_same(dsn, shown)


@settings(max_examples=400, derandomize=True, database=None, deadline=None)
@given(_uri_dsns())
def test_redact_reads_uris_as_libpq_does(case):
    """The password in the userinfo or as a query parameter whose key is
    percent-encoded in any way (``?pass%77ord=``, ``?%70ASSWORD``...)."""
    dsn, secret, rest = case
    assume(secret not in rest and quote(secret, safe="") not in rest)
    shown = redact(dsn)
    assert secret not in shown and quote(secret, safe="") not in shown, (dsn, shown)
    _libpq_reads_the_same(dsn, shown)


@settings(max_examples=200, derandomize=True, database=None, deadline=None)
@given(_SECRET.filter(lambda s: s.strip() == s and " " not in s), st.data())
def test_redact_mysql_uris_and_any_case(secret, data):
    """MySQL URIs the same way, and secret keys in any case (libpq refuses
    ``PASSWORD=``, but the text must still not show what follows it)."""
    key = "".join(ch.upper() if data.draw(st.booleans()) else ch for ch in data.draw(st.sampled_from(
        ["password", "sslpassword", "passwd", "pwd"])))
    encoded = quote(secret, safe="")
    # each DSN around its secret ({} marks where it goes): the text around it must not
    # itself contain the secret (a password "mysql://" is in every mysql:// URI)
    templates = [
        ("mysql://root:{}@db.example:3306/app", encoded),
        (f"mysql://root@db.example:3306/?{_encoded_key(data.draw, key)}={{}}&unix_socket=/run/x.sock", encoded),
        ("MARIADB://root:{}@db.example:notaport", encoded),
        (f"host=db.example {key}={{}} user=someone", _bare(secret)),
        (f"host=db.example {key} = {{}}", _quoted(secret)),
    ]
    dsns = [template.replace("{}", value) for template, value in templates]
    for (template, _), dsn in zip(templates, dsns):
        around = template.replace("{}", "***")
        assume(secret not in around and encoded not in around)
        shown = redact(dsn)
        assert secret not in shown and encoded not in shown and "***" in shown, (dsn, shown)
    assert parse_mysql_dsn(redact(dsns[0])) | {"password": ""} == parse_mysql_dsn(dsns[0]) | {"password": ""}


@pytest.mark.parametrize("dsn, shown", [
    ("host=x password=Hunter2\\ Xylophone99 user=me", "host=x password=*** user=me"),
    ("host=x password=Hunter2 Xylophone99 user=me", "host=x password=*** *** user=me"),  # libpq refuses it
    ("host=x password='Hunter2 \\'Xylophone99", "host=x password=***"),  # unterminated quote
    ("postgresql://me@h/db?pass%77ord=Hunter2Xylophone99", "postgresql://me@h/db?pass%77ord=***"),
    ("postgresql://me@h/db?password=Hunter2&Xylophone99", "postgresql://me@h/db?password=***&***"),
    ("postgresql://me:Hunter2@Xylophone99@h/db", "postgresql://me:***@h/db"),
    ("host=x dbname='postgresql://me:Hunter2Xylophone99@h/db'", "host=x dbname='postgresql://me:***@h/db'"),
    ("host=x dbname='user=me password=Hunter2Xylophone99'", "host=x dbname='user=me password=***'"),
    ('password authentication failed for user "me"', 'password authentication failed for user "me"'),
])
def test_redact_examples(dsn, shown):
    assert redact(dsn) == shown
