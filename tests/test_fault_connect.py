"""Fault matrix 6: servers lockrace cannot use.

Wrong DSN, refused connection, wrong password, server not running, mariadbd
missing: ``lockrace run`` prints one sentence on stderr (``lockrace: ...``),
exits 2, shows no traceback, and no password -- a recognizable fake one, or
the real one of a throwaway user -- appears anywhere in its output.

Servers: PostgreSQL 15 on 127.0.0.1:5432 trusts every local connection, so no
password can be wrong there; the wrong-password case for PostgreSQL uses the
tests' own private PostgreSQL 18 (Unix socket), where the test adds a
throwaway role with scram-sha-256 to pg_hba.conf and removes it afterwards.
MariaDB (127.0.0.1:3306 here, see tests/faults/dsn.py) gets a throwaway user
with a password.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from types import SimpleNamespace
from urllib.parse import quote

import psycopg
import pytest
from faults.cli import REPO, lockrace_env, run_lockrace
from faults.dsn import mysql_dsn, pg_dsn  # noqa: F401  (fixtures)

FAKE_PW = "Fake-Pw-7f3a9c"  # must never show up in any output
RIGHT_PW = "Right-Pw-4d2e8b"
ROLE = "lockrace_fault_pw"



def assert_one_clear_sentence(out, *, contains: str, secrets=(FAKE_PW,)) -> str:
    text = out.stdout + out.stderr
    assert out.returncode == 2, text
    assert "Traceback" not in text, text
    assert out.stdout == "", out.stdout
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    line = lines[0]
    assert line.startswith("lockrace: "), line
    assert contains in line, line
    assert line.count("(") == line.count(")"), f"unbalanced parentheses: {line}"
    for secret in secrets:
        assert secret not in text, f"password leaked: {text}"
    return line


PG_CASES = {
    "unparsable": (f"host=127.0.0.1 password='{FAKE_PW}", "not a PostgreSQL DSN: host=127.0.0.1 password=***"),
    "mysql-dsn-given-to-pg": (f"mysql://root:{FAKE_PW}@127.0.0.1:3306", "is a MySQL DSN; give it with --mysql"),
    "refused": (f"postgresql://postgres:{FAKE_PW}@127.0.0.1:1/postgres", "port 1 failed: Connection refused"),
    "not-running": (f"host=/tmp/lockrace-fault-no-server port=5432 user=postgres password={FAKE_PW}",
                    'connection to server on socket "/tmp/lockrace-fault-no-server/.s.PGSQL.5432" failed'),
    "unknown-host": (f"postgresql://postgres:{FAKE_PW}@no-such-host.invalid/postgres",
                     "failed to resolve host 'no-such-host.invalid'"),
    # libpq reads "Hunter2\\ Fake..." as one password with a space in it
    "escaped-space-password": (f"host=/tmp/lockrace-fault-no-server port=5432 user=postgres password=Hunter2\\ {FAKE_PW}",
                               "user=postgres password=***: connection to server on socket"),
    # libpq decodes URI query keys: pass%77ord is password
    "percent-encoded-key": (f"postgresql://postgres@127.0.0.1:1/postgres?pass%77ord={FAKE_PW}",
                            "?pass%77ord=***: connection to server at \"127.0.0.1\", port 1 failed"),
}

MYSQL_CASES = {
    "unparsable-port": (f"mysql://root:{FAKE_PW}@127.0.0.1:notaport", "not a MySQL DSN: mysql://root:***@127.0.0.1:notaport"),
    "pg-dsn-given-to-mysql": (f"postgresql://root:{FAKE_PW}@127.0.0.1:3306", "not a MySQL DSN"),
    "refused": (f"mysql://root:{FAKE_PW}@127.0.0.1:1",
                "cannot connect to MySQL/MariaDB at mysql://root@127.0.0.1:1: Can't connect to MySQL server on "
                "'127.0.0.1' ([Errno 111] Connection refused)"),
    "not-running": (f"mysql://root:{FAKE_PW}@localhost/?unix_socket=/tmp/lockrace-fault-no-server.sock",
                    "at mysql://root@/tmp/lockrace-fault-no-server.sock: Can't connect"),
    "percent-encoded-key": (f"mysql://root@127.0.0.1:notaport/?PASS%57ORD={FAKE_PW}",
                            "not a MySQL DSN: mysql://root@127.0.0.1:notaport/?PASS%57ORD=***"),
}


def live_server_cases(pg_dsn, mysql_dsn) -> dict:
    """Cases that need a server that answers (see tests/faults/dsn.py)."""
    return {
        "pg-no-such-database": ("pg-nowait", "--pg", f"{pg_dsn.dsn('lockrace_fault_no_db')} password={FAKE_PW}",
                                'database "lockrace_fault_no_db" does not exist'),
        "mysql-unknown-user": ("mysql-nowait", "--mysql", mysql_dsn.dsn("lockrace_fault_nobody", FAKE_PW),
                               f"Access denied for user 'lockrace_fault_nobody'@'{mysql_dsn.user_host}'"
                               " (using password: YES)"),
    }


ENV_CASE = {"LOCKRACE_PG_DSN": f"postgresql://postgres:{FAKE_PW}@127.0.0.1:1/postgres"}


@pytest.fixture(scope="module")
def dsn_results(tmp_path_factory, pg_dsn, mysql_dsn):
    """Every DSN case above, each a full ``lockrace run`` command line, run in one
    subprocess (tests/faults/run_many.py) to save an interpreter start per case."""
    cases = {f"pg-{k}": {"argv": ["run", "pg-nowait", "--pg", dsn]} for k, (dsn, _) in PG_CASES.items()}
    cases |= {f"mysql-{k}": {"argv": ["run", "mysql-nowait", "--mysql", dsn]} for k, (dsn, _) in MYSQL_CASES.items()}
    cases["pg-from-environment"] = {"argv": ["run", "pg-nowait"], "env": ENV_CASE}
    cases |= {k: {"argv": ["run", name, flag, dsn]} for k, (name, flag, dsn, _) in live_server_cases(pg_dsn, mysql_dsn).items()}
    results = run_many(list(cases.values()), tmp_path_factory.mktemp("dsn"))
    return dict(zip(cases, results))


@pytest.mark.parametrize("case", list(PG_CASES))
def test_unusable_pg_dsn(case, dsn_results):
    assert_one_clear_sentence(dsn_results[f"pg-{case}"], contains=PG_CASES[case][1])


@pytest.mark.parametrize("case", list(MYSQL_CASES))
def test_unusable_mysql_dsn(case, dsn_results):
    assert_one_clear_sentence(dsn_results[f"mysql-{case}"], contains=MYSQL_CASES[case][1])


@pytest.mark.parametrize("case", ["pg-no-such-database", "mysql-unknown-user"])
def test_unusable_dsn_on_a_live_server(case, dsn_results, pg_dsn, mysql_dsn):
    assert_one_clear_sentence(dsn_results[case], contains=live_server_cases(pg_dsn, mysql_dsn)[case][3])


def test_unusable_dsn_from_environment(dsn_results):
    assert_one_clear_sentence(dsn_results["pg-from-environment"], contains="Connection refused")


def test_unusable_dsn_as_a_real_process():
    """One case end to end as its own process: exit status and streams as a shell sees them."""
    out = run_lockrace(["run", "pg-nowait", "--pg", PG_CASES["refused"][0]], lockrace_env())
    assert_one_clear_sentence(out, contains=PG_CASES["refused"][1])


# ------------------------------------------------------------------ passwords


@pytest.fixture
def pg_password_role(pg_server):
    """A role on the tests' private PostgreSQL that must give a password."""
    hba = pg_server.server.dir / "data" / "pg_hba.conf"
    original = hba.read_text()
    with psycopg.connect(pg_server.conninfo, autocommit=True) as conn:
        conn.execute("SET password_encryption = 'scram-sha-256'")
        conn.execute(f"CREATE ROLE {ROLE} LOGIN PASSWORD '{RIGHT_PW}'")
        conn.execute(f"GRANT CREATE ON DATABASE postgres TO {ROLE}")
        hba.write_text(f"local all {ROLE} scram-sha-256\n" + original)
        conn.execute("SELECT pg_reload_conf()")
    try:
        yield f"host={pg_server.server.dir} port=5432 dbname=postgres user={ROLE}"
    finally:
        hba.write_text(original)
        with psycopg.connect(pg_server.conninfo, autocommit=True) as conn:
            conn.execute("SELECT pg_reload_conf()")
            conn.execute(f"DROP SCHEMA IF EXISTS {ROLE}_box CASCADE")
            conn.execute(f"REVOKE CREATE ON DATABASE postgres FROM {ROLE}")
            conn.execute(f"DROP ROLE IF EXISTS {ROLE}")


@pytest.fixture
def mysql_password_user(mysql_dsn):
    """A throwaway MariaDB user with a password and rights on its own sandbox only."""
    host = mysql_dsn.user_host
    conn = mysql_dsn.connect()
    cur = conn.cursor()
    cur.execute(f"DROP USER IF EXISTS '{ROLE}'@'{host}'")
    cur.execute(f"CREATE USER '{ROLE}'@'{host}' IDENTIFIED BY '{RIGHT_PW}'")
    cur.execute(f"GRANT ALL ON `{ROLE}_box`.* TO '{ROLE}'@'{host}'")
    cur.execute(f"GRANT PROCESS ON *.* TO '{ROLE}'@'{host}'")  # lock views, as the README asks of a DSN user
    try:
        yield mysql_dsn.dsn(ROLE, "{pw}")  # .format(pw=...) fills in the password
    finally:
        cur.execute(f"DROP DATABASE IF EXISTS `{ROLE}_box`")
        cur.execute(f"DROP USER IF EXISTS '{ROLE}'@'{host}'")
        conn.close()


def test_wrong_password_pg(pg_password_role):
    out = run_lockrace(["run", "pg-nowait", "--pg", f"{pg_password_role} password={FAKE_PW}"], lockrace_env())
    line = assert_one_clear_sentence(out, contains=f'password authentication failed for user "{ROLE}"')
    assert "password=***" in line


def test_wrong_password_mysql(mysql_password_user, mysql_dsn):
    out = run_lockrace(["run", "mysql-nowait", "--mysql", mysql_password_user.format(pw=FAKE_PW)], lockrace_env())
    assert_one_clear_sentence(out, contains=f"Access denied for user '{ROLE}'@'{mysql_dsn.user_host}' (using password: YES)")


def run_many(cases: list[dict], tmp_dir) -> list[SimpleNamespace]:
    """Several ``lockrace`` command lines in one subprocess (tests/faults/run_many.py)."""
    path = tmp_dir / "cases.json"
    path.write_text(json.dumps(cases))
    out = subprocess.run([sys.executable, str(REPO / "tests" / "faults" / "run_many.py"), str(path)], cwd=REPO,
                         env=lockrace_env(), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return [SimpleNamespace(returncode=r["code"], stdout=r["stdout"], stderr=r["stderr"]) for r in json.loads(out.stdout)]


def test_right_password_never_printed(pg_password_role, mysql_password_user, tmp_path):
    """Runs that work: neither password appears in the transcript or the JSON report."""
    env = {"LOCKRACE_SANDBOX": f"{ROLE}_box"}
    cases = [{"argv": ["run", name, flag, dsn, "--format", fmt], "env": env}
             for name, flag, dsn in (("pg-nowait", "--pg", f"{pg_password_role} password={RIGHT_PW}"),
                                     ("mysql-nowait", "--mysql", mysql_password_user.format(pw=RIGHT_PW)))
             for fmt in ("transcript", "json")]
    for case, out in zip(cases, run_many(cases, tmp_path)):
        assert out.returncode == 0, (case["argv"], out.stdout + out.stderr)
        assert "Verified against" in out.stdout or '"passed": true' in out.stdout, out.stdout
        assert RIGHT_PW not in out.stdout + out.stderr, case["argv"]


# ------------------------------------------------------------------ no mariadbd


def test_mariadbd_missing():
    """What no real server can produce: a machine without mariadbd or mysqld.

    Faked in the subprocess only: PATH holds no server binary, and the
    fallback directories lockrace also searches (/usr/sbin, ...) are emptied
    in that process, since this machine does have /usr/sbin/mariadbd.
    """
    code = (
        "import sys; import lockrace.servers.private_mysql as pm; pm._SEARCH = ();"
        "from lockrace.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    env = lockrace_env(PATH=os.path.dirname(sys.executable))
    env.pop("LOCKRACE_MYSQLD", None)  # (no server named either)
    out = subprocess.run([sys.executable, "-c", code, "run", "mysql-nowait"], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=60)
    line = assert_one_clear_sentence(out, contains="no MariaDB/MySQL server available")
    # it names both ways to get one
    assert "mariadbd" in line and "--mysql" in line and "LOCKRACE_MYSQL_DSN" in line


@pytest.mark.parametrize("server, words", [
    ("/nonexistent/mysqld", "is not an executable file"),
    ("/bin/echo", "is not a MariaDB or MySQL server"),
])
def test_lockrace_mysqld_that_is_no_server(server, words, tmp_path):
    """LOCKRACE_MYSQLD naming something that is not a MariaDB or MySQL server: one sentence,
    exit 2, and no temp dir left behind."""
    env = lockrace_env(tmp_path, LOCKRACE_MYSQLD=server)
    out = subprocess.run([sys.executable, "-m", "lockrace", "run", "mysql-nowait"], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=60)
    line = assert_one_clear_sentence(out, contains=words)
    assert f"LOCKRACE_MYSQLD={server}" in line
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ the app


def _screen_text(app) -> str:
    """Everything the app shows: the rendered screen plus any notifications."""
    notes = " ".join(str(n.message) for n in getattr(app, "_notifications", []))
    return app.export_screenshot() + notes + app.sub_title


@pytest.mark.parametrize("which", ["wrong", "right", "wrong-escaped-space", "wrong-percent-encoded-key"])
async def test_app_never_shows_a_password(which, pg_password_role, monkeypatch):
    import asyncio

    from psycopg.conninfo import conninfo_to_dict

    from lockrace.app.app import LockraceApp

    password = RIGHT_PW if which == "right" else FAKE_PW
    dsn = f"{pg_password_role} password={password}"
    if which == "wrong-escaped-space":
        dsn = f"{pg_password_role} password=Hunter2\\ {password}"
    elif which == "wrong-percent-encoded-key":
        parts = conninfo_to_dict(pg_password_role)
        dsn = (f"postgresql://{parts['user']}@/{parts['dbname']}?host={quote(parts['host'], safe='')}"
               f"&port={parts['port']}&pass%77ord={password}")
    monkeypatch.setenv("LOCKRACE_SANDBOX", f"{ROLE}_box")  # not the tests' own sandbox on this server
    app = LockraceApp(engine="postgres", pg=dsn)
    async with app.run_test(size=(160, 48)) as pilot:
        if which != "right":
            banner = app.query_one("#banner")
            for _ in range(200):
                if "could not start or reach" in str(banner.render()):
                    break
                await asyncio.sleep(0.05)
            shown = str(banner.render())
            assert f'password authentication failed for user "{ROLE}"' in shown, shown
            assert app.is_running
        else:
            await asyncio.wait_for(app.ready.wait(), 30)
            await pilot.pause()
            assert "PostgreSQL 18" in app.sub_title and app.race is not None
        assert password not in _screen_text(app)
        await pilot.press("ctrl+q")
        for _ in range(200):
            if not app.is_running:
                break
            await asyncio.sleep(0.05)


# ------------------------------------------------------------------ redaction, as a property

from hypothesis import assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from lockrace.servers.target import DsnError, parse_mysql_dsn, pg_target, redact  # noqa: E402

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
