"""A session's budgets follow what it runs, as the server's rules say, with nothing read back."""

from lockrace.core.events import Budget
from lockrace.engine.budget_book import BudgetBook, pg_ms

PG_START = (Budget("lock_timeout", 0.0), Budget("statement_timeout", 0.0), Budget("deadlock_timeout", 1000.0),
            Budget("idle_in_transaction_session_timeout", 0.0), Budget("max_standby_streaming_delay", 30000.0))


def pg(book, sql, tags, failed=False, txn="idle"):
    book.follow(sql, tags, failed, txn)
    return {b.name: b.ms for b in book.budgets()}


def test_pg_units():
    assert (pg_ms("100ms"), pg_ms("2s"), pg_ms("1500"), pg_ms("1min"), pg_ms("1500us"), pg_ms("x")) == \
        (100.0, 2000.0, 1500.0, 60000.0, 2.0, None)


def test_pg_session_set_reset_and_set_config():
    book = BudgetBook("postgres", PG_START)
    assert pg(book, "SET lock_timeout = '300ms'", ["SET"])["lock_timeout"] == 300
    assert pg(book, "set statement_timeout to 2000", ["SET"])["statement_timeout"] == 2000
    assert pg(book, "SET lock_timeout = 'nonsense'", [], failed=True)["lock_timeout"] == 300  # refused: unchanged
    assert pg(book, "RESET lock_timeout", ["RESET"])["lock_timeout"] == 0
    assert pg(book, "SELECT set_config('lock_timeout', '1s', false)", ["SELECT 1"])["lock_timeout"] == 1000
    assert pg(book, "RESET ALL", ["RESET"]) == {b.name: b.ms for b in PG_START}
    # a value from an expression: unknown, left out rather than guessed
    assert "lock_timeout" not in pg(book, "SELECT set_config('lock_timeout', x, false) FROM t", ["SELECT 1"])
    # the server-level standby budget stays
    assert pg(book, "SET lock_timeout = 5", ["SET"])["max_standby_streaming_delay"] == 30000


def test_pg_transactions_undo_what_they_set():
    book = BudgetBook("postgres", PG_START)
    pg(book, "BEGIN", ["BEGIN"], txn="in transaction")
    assert pg(book, "SET lock_timeout = '1s'", ["SET"], txn="in transaction")["lock_timeout"] == 1000
    assert pg(book, "SET LOCAL statement_timeout = '5s'", ["SET"], txn="in transaction")["statement_timeout"] == 5000
    assert pg(book, "ROLLBACK", ["ROLLBACK"]) == {b.name: b.ms for b in PG_START}
    # committed: the session-level value stays, SET LOCAL goes
    pg(book, "BEGIN; SET lock_timeout = '1s'; SET LOCAL statement_timeout = 7", ["BEGIN", "SET", "SET"],
       txn="in transaction")
    got = pg(book, "COMMIT", ["COMMIT"])
    assert (got["lock_timeout"], got["statement_timeout"]) == (1000, 0)
    # a failed transaction's COMMIT is a ROLLBACK
    pg(book, "BEGIN", ["BEGIN"], txn="in transaction")
    pg(book, "SET lock_timeout = 50", ["SET"], txn="in transaction")
    pg(book, "SELECT 1/0", [], failed=True, txn="failed transaction")
    assert pg(book, "COMMIT", ["ROLLBACK"])["lock_timeout"] == 1000


def test_pg_savepoints_and_implicit_transactions():
    book = BudgetBook("postgres", PG_START)
    pg(book, "BEGIN; SET lock_timeout = 10; SAVEPOINT a; SET lock_timeout = 20", ["BEGIN", "SET", "SAVEPOINT", "SET"],
       txn="in transaction")
    assert pg(book, "ROLLBACK TO SAVEPOINT a", ["ROLLBACK"], txn="in transaction")["lock_timeout"] == 10
    assert pg(book, "COMMIT", ["COMMIT"])["lock_timeout"] == 10
    # several statements outside a transaction are one implicit transaction: an error undoes the SET
    assert pg(book, "SET lock_timeout = 99; SELECT 1/0", ["SET"], failed=True)["lock_timeout"] == 10
    assert pg(book, "SET lock_timeout = 99; SELECT 1", ["SET", "SELECT 1"])["lock_timeout"] == 99
    # SET LOCAL outside a transaction block does nothing
    assert pg(book, "SET LOCAL lock_timeout = 5", ["SET"])["lock_timeout"] == 99
    # a SET inside a comment or a string is no SET
    assert pg(book, "SELECT 'SET lock_timeout = 1' /* SET lock_timeout = 2 */", ["SELECT 1"])["lock_timeout"] == 99


def test_mysql_sets_are_cut_to_the_servers_range():
    start = (Budget("innodb_lock_wait_timeout", 50000.0), Budget("lock_wait_timeout", 86400000.0),
             Budget("max_statement_time", 0.0))
    book = BudgetBook("mariadb", start, {"innodb_lock_wait_timeout": 50000.0})

    def my(sql, n=1):
        book.follow(sql, ["Query OK"] * n, False, "idle")
        return {b.name: b.ms for b in book.budgets()}

    assert my("SET SESSION innodb_lock_wait_timeout = 2000000000")["innodb_lock_wait_timeout"] == 100_000_000_000
    assert my("SET @@session.innodb_lock_wait_timeout := 3, lock_wait_timeout = 7")["lock_wait_timeout"] == 7000
    assert my("SET innodb_lock_wait_timeout = DEFAULT")["innodb_lock_wait_timeout"] == 50000
    assert my("SET GLOBAL innodb_lock_wait_timeout = 9")["innodb_lock_wait_timeout"] == 50000
    assert my("SET max_statement_time = 0.5")["max_statement_time"] == 500
    assert "innodb_lock_wait_timeout" not in my("SET innodb_lock_wait_timeout = @x")
    mysql = BudgetBook("mysql8", (Budget("innodb_lock_wait_timeout", 50000.0),))
    mysql.follow("SET innodb_lock_wait_timeout = 2000000000", ["Query OK"], False, "idle")
    assert mysql.budgets()[0].ms == 1_073_741_824_000
