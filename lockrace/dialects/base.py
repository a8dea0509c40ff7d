"""What a database flavor is to the engine: one object per server family member
(PostgreSQL, MariaDB, MySQL 8/9) that answers every question whose answer differs
between the servers, so that the engine never asks which server it runs on.

Pure, no I/O, no Textual: what an error code means, how a statement's wait budget
is read from its text and the session's settings, how a prepared transaction is
rolled back, what a session's server-side id is called, which SQL lexer reads its
text, and the text of its lock-view queries (``sql/<flavor>/<name>.sql``).
"""

from __future__ import annotations

import re
from functools import cache
from importlib.resources import files

from ..core.events import Budget
from ..core.outcome import Outcome
from ..core.sqltext import Token, try_statements

NOWAIT = Budget("NOWAIT", 0.0)

_VERSIONED = re.compile(r"^(?P<name>.+)_post_(?P<version>\d+)$")


class Dialect:
    """The base contract; each flavor's module subclasses it (see dialects/__init__.py)."""

    name: str = ""  # lockrace's flavor: postgres | mariadb | mysql8
    family: str = ""  # registry.Family: postgres | mysql
    label: str = ""  # PostgreSQL | MariaDB | MySQL
    lexer: str = ""  # the core/sqltext dialect that reads its SQL text
    ident_word: str = ""  # what a session's server-side id is: "pid" | "thread"

    # budgets
    budget_names: tuple[str, ...] = ()  # the settings that end a wait, as the server names them
    budget_ranges: dict[str, tuple[float, float]] = {}  # what the server cuts a session value to
    fractional_budgets: frozenset[str] = frozenset()  # settings that take a fraction of their unit
    transactional_settings = False  # SET is undone by ROLLBACK (PostgreSQL)

    # locks and what the engine keeps track of
    tracks_metadata_locks = False  # the session's own statements tell its metadata locks (MySQL family)
    nowait_bounds_table_locks = False  # NOWAIT refuses a table/metadata lock too (MariaDB)
    deadlock_in_detail = False  # the victim's error names the cycle (PostgreSQL's DETAIL lines)
    qualified_table_names = False  # the deadlock report names tables as sandbox.table
    monitor_sees_own_changes = True  # the monitor's SKIP LOCKED count reads the session's own changes
    xa_owner_finishes = False  # only the connection that prepared an XA transaction may end it
    lock_error_codes: frozenset[str] = frozenset()  # lock errors whose answer may be taken before the state is read

    # a row lock's budget, as lockrace bench sets it
    row_lock_setting = ""  # the setting that bounds a row-lock wait
    row_lock_whole_seconds = False  # it takes whole seconds only
    row_lock_budget_by_default = False  # the server bounds a row-lock wait unless told otherwise
    statement_wait_n = False  # SELECT ... FOR UPDATE WAIT n exists
    bench_defaults = (500, 100)  # lockrace bench: hold_ms, budget_ms

    # migrations (lockrace rehearse)
    ddl_lock_setting = ""  # the setting that bounds a DDL's lock wait
    ddl_lock_example = ""  # a policy part that sets it
    ddl_lock_whole_seconds = False
    online_ddl = ""  # the policy that asks for the online variant of a DDL
    transactional_ddl = False  # a migration's statements can run in one transaction
    identifier_quote = '"'
    table_options = ""  # what a CREATE TABLE of lockrace's own ends with
    migration_presets: tuple[str, ...] = ()  # the migration tools whose defaults a policy may name
    default_policies: tuple[str, ...] = ()  # what a rehearsal compares unless told otherwise

    # how the server's own command-line client prints an answer (psql, mysql)
    empty_result = ""  # a result set without rows: "" prints its header and (0 rows)

    # ------------------------------------------------------------ outcomes
    def classify(self, code: str | int | None, message: str, sql: str, connection_closed: bool = False) -> Outcome:
        """The outcome class of an answer from the error the server sent (None: no error code)."""
        raise NotImplementedError

    def settle(self, outcome: str, code: str | None, budget: Budget | None) -> tuple[str, Budget | None]:
        """The outcome and the budget, once the budget in force is known: what the code
        alone cannot tell (a lock timeout at a zero budget is a refusal)."""
        return outcome, budget

    # ------------------------------------------------------------ budgets
    def is_metadata_wait(self, sql: str) -> bool:
        """Whether a plain statement's lock wait is a metadata-lock wait (DDL on MySQL)."""
        return False

    def statement_budget(self, budgets: tuple[Budget, ...], sql: str, metadata: bool = False) -> Budget | None:
        """The wait budget that will end a lock wait of ``sql`` given the session's
        ``budgets`` (``metadata``: the wait is known to be a metadata-lock wait)."""
        raise NotImplementedError

    # ------------------------------------------------------------ settings lockrace sets
    def set_sql(self, setting: str, ms: float, local: bool = False) -> str:
        """Set ``setting`` (a duration) to ``ms`` for the session (``local``: for the
        transaction only, where the server can)."""
        raise NotImplementedError

    def reset_sql(self, setting: str) -> str:
        """Give ``setting`` back the session's default."""
        raise NotImplementedError

    def ddl_budget_sql(self, ms: float | None, local: bool = False) -> str:
        """Bound a DDL's lock wait to ``ms`` (None: no bound); ``local``: for the
        transaction only, where the server can."""
        raise NotImplementedError

    def statement_limit_sql(self, seconds: float) -> str:
        """Bound every later statement of the session to ``seconds`` of run time."""
        raise NotImplementedError

    def error_text(self, code: str | None, message: str, severity: str | None = None,
                   sqlstate: str | None = None) -> str:
        """An error as the server's client prints it."""
        raise NotImplementedError

    # ------------------------------------------------------------ prepared transactions
    def rollback_prepared(self, gid: str) -> str:
        """The statement that rolls back prepared transaction ``gid`` (an SQL literal)."""
        raise NotImplementedError

    def prepared_changes(self, sql: str, tags: list[str] | None) -> tuple[list[str], list[str]]:
        """(prepared, finished) by the statements of ``sql`` that succeeded (see core/prepared.py)."""
        raise NotImplementedError

    # ------------------------------------------------------------ text and names
    def statements(self, sql: str) -> list[list[Token]] | None:
        """``sql`` read as this server reads it (None: it cannot be read)."""
        return try_statements(sql, self.lexer)

    def session_ident(self, ident: int) -> str:
        """'pid 4242' / 'thread 17'."""
        return f"{self.ident_word} {ident}"

    # ------------------------------------------------------------ lock views
    def lock_view(self, name: str, server_version: int | None = None) -> str:
        """The text of this flavor's lock-view query ``name``: ``sql/<flavor>/<name>.sql``,
        or ``<name>_post_<version>.sql`` for the highest such version the server has
        reached (``server_version`` as the server numbers it, 140000 for 14.0)."""
        return lock_view_text(self.name, name, server_version)

    def __repr__(self) -> str:
        return f"<dialect {self.name}>"


@cache
def _versions(flavor: str) -> dict[str, list[tuple[int, str]]]:
    """Per query name: (version, file stem) of the files written for a server version on."""
    out: dict[str, list[tuple[int, str]]] = {}
    for entry in (files(__package__) / "sql" / flavor).iterdir():
        stem = entry.name.removesuffix(".sql")
        m = _VERSIONED.match(stem)
        if m:
            out.setdefault(m.group("name"), []).append((int(m.group("version")), stem))
    for found in out.values():
        found.sort()
    return out


@cache
def lock_view_text(flavor: str, name: str, server_version: int | None = None) -> str:
    """``sql/<flavor>/<name>.sql`` (or its newest variant the server version allows),
    leading ``--`` comment lines removed: what remains is sent as is."""
    stem = name
    if server_version is not None:
        for version, candidate in _versions(flavor).get(name, []):
            if server_version >= version:
                stem = candidate
    text = (files(__package__) / "sql" / flavor / f"{stem}.sql").read_text(encoding="utf-8")
    lines = text.splitlines()
    while lines and (lines[0].startswith("--") or not lines[0].strip()):
        lines.pop(0)
    return "\n".join(lines) + "\n"
