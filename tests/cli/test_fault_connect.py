"""Fault matrix 6: servers lockrace cannot use.

Wrong DSN, refused connection, wrong password, server not running, mariadbd
missing: ``lockrace run`` prints one sentence on stderr (``lockrace: ...``),
exits 2, shows no traceback, and no password -- a recognizable fake one, or
the real one of a throwaway user -- appears anywhere in its output.

Servers: PostgreSQL 15 on 127.0.0.1:5432 trusts every local connection, so no
password can be wrong there; the wrong-password case for PostgreSQL uses the
tests' own private PostgreSQL 18 (Unix socket), where the test adds a
throwaway role with scram-sha-256 to pg_hba.conf and removes it afterwards.
MariaDB (127.0.0.1:3306 here, see tests/support/dsn.py) gets a throwaway user
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
from support.cli import REPO, lockrace_env, run_lockrace
from support.dsn import mysql_dsn, pg_dsn  # noqa: F401  (fixtures)

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
    """Cases that need a server that answers (see tests/support/dsn.py)."""
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
    subprocess (tests/support/run_many.py) to save an interpreter start per case."""
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
    """Several ``lockrace`` command lines in one subprocess (tests/support/run_many.py)."""
    path = tmp_dir / "cases.json"
    path.write_text(json.dumps(cases))
    out = subprocess.run([sys.executable, str(REPO / "tests" / "support" / "run_many.py"), str(path)], cwd=REPO,
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
