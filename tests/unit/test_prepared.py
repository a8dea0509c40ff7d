"""Prepared and XA transactions are lockrace's only when the server's answer says a
session's own statement prepared them."""

from lockrace.core.prepared import changes


def test_only_what_the_server_prepared():
    assert changes("SELECT 1 /* PREPARE TRANSACTION 'payment-42' */", ["SELECT 1"], "postgres") == ([], [])
    # outside a transaction the server answers ROLLBACK: nothing was prepared
    assert changes("PREPARE TRANSACTION 'payment-42'", ["ROLLBACK"], "postgres") == ([], [])
    assert changes("BEGIN; SELECT pg_advisory_xact_lock(1); PREPARE TRANSACTION E'a\\'b'",
                   ["BEGIN", "SELECT 1", "PREPARE TRANSACTION"], "postgres") == (["'a''b'"], [])
    # the statement after a failed one never ran
    assert changes("SELECT 1/0; PREPARE TRANSACTION 'x'", [], "postgres") == ([], [])
    assert changes("COMMIT PREPARED 'x'", ["COMMIT PREPARED"], "postgres") == ([], ["'x'"])


def test_xa_names_as_hex():
    assert changes("XA PREPARE 'x', 'y', 3; XA COMMIT 'z' ONE PHASE", ["", ""], "mysql") == \
        (["X'78',X'79',3"], ["X'7a'"])
    assert changes("SELECT 'XA PREPARE 1' # XA PREPARE 'q'\n", [""], "mysql") == ([], [])
    assert changes("XA PREPARE 'x'", None, "mysql") == (["X'78'"], [])
