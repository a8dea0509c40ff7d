"""Each expectation key on its own: how it is read, checked and shown (no server)."""

from __future__ import annotations

import pytest

from lockrace.core.events import REPLAY_PROCESS, Budget, LockInfo, StatementResult
from lockrace.core.outcome import Outcome
from lockrace.engine.verify import StepRecord, check
from lockrace.scenario.errors import ScenarioError
from lockrace.scenario.expectations import BY_WORD, KEYS, BadValue, TimeBound, describe
from lockrace.scenario.model import Expectation, Step
from lockrace.scenario.text_format import EXPECT_KEYS, parse_scenario, write_scenario


def record(result: StatementResult | None = None, **kw) -> StepRecord:
    return StepRecord(Step("1", "A", "SELECT 1;"), 1, result if result is not None else StatementResult("ok"), **kw)


def parse(word: str, text: str, steps: int = 3) -> object:
    return BY_WORD[word].parse(text, steps)


def met(name: str, want: object, rec: StepRecord) -> tuple[bool, str]:
    return KEYS[name].check(want, rec)


def test_every_key_is_listed_once_in_the_reader_order():
    assert list(EXPECT_KEYS) == ["expect", "code", "message", "rows", "row", "tag", "blocked-by", "completes-after",
                                 "txn", "skipped", "rows-exactly", "notice", "lock", "took"]
    assert {spec.name for spec in KEYS.values()} == set(EXPECT_KEYS.values())
    assert all(BY_WORD[spec.word] is spec for spec in KEYS.values())


# outcome ---------------------------------------------------------------------


def test_outcome_parse_check_describe():
    assert parse("expect", "refused") == "refused"
    assert parse("expect", "timed_out |refused") == "timed_out | refused"
    with pytest.raises(BadValue, match=r"unknown outcome 'blocked' \(known: ok, timed_out"):
        parse("expect", "blocked")
    assert met("outcome", "refused", record(StatementResult("refused", code="55P03", message="no"))) == \
        (True, "refused (55P03: no)")
    assert met("outcome", "timed_out | refused", record(StatementResult("refused"))) == (True, "refused")
    assert met("outcome", "ok", record(StatementResult(Outcome.DEADLOCK))) == (False, "deadlock")
    assert describe("outcome", "refused", "mariadb") == "expect[mariadb]: refused"


# code, message, tag, notice ----------------------------------------------------


def test_code():
    assert parse("code", "55P03") == "55P03"
    assert parse("code", "1205") == "1205"
    with pytest.raises(BadValue, match="code must be a SQLSTATE"):
        parse("code", "55p03")
    assert met("code", "1205", record(StatementResult("timed_out", code="1205"))) == (True, "1205")
    assert met("code", "1205", record()) == (False, "no error")
    assert describe("code", "1205") == "code: 1205"


def test_message():
    assert parse("message", "could not obtain lock") == "could not obtain lock"
    with pytest.raises(BadValue, match="'message' needs a value"):
        parse("message", "")
    assert met("message", "x", record(StatementResult("error", message="x"))) == (True, "'x'")
    assert met("message", "x", record()) == (False, "no message")
    assert describe("message", "x") == "message: x"


def test_tag():
    with pytest.raises(BadValue, match="'tag' needs a value"):
        parse("tag", "")
    assert met("tag", "UPDATE 1", record(StatementResult("ok", tag="UPDATE 1"))) == (True, "'UPDATE 1'")
    assert met("tag", "UPDATE 1", record(StatementResult("ok", tag="UPDATE 0"))) == (False, "'UPDATE 0'")
    assert describe("tag", "UPDATE 1") == "tag: UPDATE 1"


def test_notice():
    with pytest.raises(BadValue, match="'notice' needs a value"):
        parse("notice", "")
    res = StatementResult("ok", notices=["Table 'x' already EXISTS"])
    assert met("notice", "already exists", record(res)) == (True, "Table 'x' already EXISTS")
    assert met("notice", "gone", record()) == (False, "no notice or warning")
    assert describe("notice", "already exists") == "notice: already exists"


# counts ------------------------------------------------------------------------


@pytest.mark.parametrize("word", ["rows", "skipped"])
def test_counts_parse(word):
    assert parse(word, "007") == 7
    with pytest.raises(BadValue, match=rf"'{word}' needs a whole number \(digits 0-9\), got '²'"):
        parse(word, "²")
    with pytest.raises(BadValue, match=rf"'{word}' is too large"):
        parse(word, "1234567890")


def test_rows():
    assert met("rows", 2, record(StatementResult("ok", rows=[(1,), (2,)], has_rows=True))) == (True, "2")
    assert met("rows", 2, record()) == (False, "no result set")
    assert describe("rows", 2) == "rows: 2"


def test_skipped():
    assert met("skipped", 1, record(StatementResult("skipped", skipped_rows=1))) == (True, "1")
    assert met("skipped", 1, record()) == (False, "0")
    assert describe("skipped", 1, "postgres") == "skipped[postgres]: 1"


def test_completes_after():
    assert parse("completes-after", "4") == 4
    with pytest.raises(BadValue, match="completes-after needs a step number"):
        parse("completes-after", "0")
    spec = KEYS["completes_after"]
    assert spec.reference_problem(4, 2, 5, set()) is None
    assert spec.reference_problem(2, 2, 5, set()) == "completes-after: 2 must name a later step (up to 5)"
    assert met("completes_after", 3, record(launched_before_finish=3)) == (True, "finished after step 3")
    assert met("completes_after", 3, record(launched_before_finish=2)) == (False, "finished after step 2")
    assert describe("completes_after", 3) == "completes-after: 3"


# rows ---------------------------------------------------------------------------


def test_row():
    assert parse("row", "1 | 100") == ["1", "100"]
    res = StatementResult("ok", rows=[(1, None)], has_rows=True)
    assert met("row", ["1", "NULL"], record(res)) == (True, "rows 1 | NULL")
    assert met("row", ["2", "NULL"], record(res)) == (False, "rows 1 | NULL")
    assert met("row", ["2"], record()) == (False, "no rows")
    assert describe("row", ["1", "100"]) == "row: 1 | 100"


def test_rows_exactly():
    spec = BY_WORD["rows-exactly"]
    assert spec.accumulates
    assert parse("rows-exactly", "1 | a") == [["1", "a"]]
    with pytest.raises(BadValue, match="an empty result is 'rows: 0'"):
        parse("rows-exactly", "")
    res = StatementResult("ok", rows=[(1, "a"), (2, "b")], has_rows=True)
    assert met("rows_exactly", [["1", "a"], ["2", "b"]], record(res)) == (True, "rows 1 | a; 2 | b")
    assert met("rows_exactly", [["2", "b"], ["1", "a"]], record(res))[0] is False
    assert met("rows_exactly", [["1"]], record()) == (False, "no result set")
    cut = StatementResult("ok", rows=[(1,)], has_rows=True, row_count=5)
    assert met("rows_exactly", [["1"]], record(cut)) == (False, "5 rows, more than lockrace keeps")
    assert describe("rows_exactly", [["1", "a"], ["2", "b"]]) == "rows-exactly: 1 | a; 2 | b"
    assert spec.lines([["1", "a"], ["2", "b"]]) == ["1 | a", "2 | b"]


# sessions and locks ---------------------------------------------------------------


def test_blocked_by():
    assert parse("blocked-by", "A, C") == "A, C"
    with pytest.raises(BadValue, match="'blocked-by' needs a value"):
        parse("blocked-by", "")
    spec = KEYS["blocked_by"]
    assert spec.reference_problem("A, replay", 2, 3, {"A", "B"}) is None
    assert spec.reference_problem("nobody", 2, 3, {"A"}) is None
    assert spec.reference_problem("A Z", 2, 3, {"A"}) == "blocked-by: no session named Z"
    waited = StatementResult("timed_out", blockers_seen=("A",))
    assert met("blocked_by", "A", record(waited, was_blocked=True, blockers=("C",))) == (True, "blocked by A, C")
    assert met("blocked_by", "B", record(waited, was_blocked=True)) == (False, "blocked by A")
    assert met("blocked_by", "A", record()) == (False, "never reported blocked")
    assert met("blocked_by", "nobody", record()) == (True, "never reported blocked")
    assert met("blocked_by", "nobody", record(was_blocked=True)) == (False, "blocked by another transaction")
    standby = StatementResult("recovery_conflict", blockers_seen=(REPLAY_PROCESS,))
    assert met("blocked_by", "replay", record(standby, was_blocked=True))[0] is True
    assert describe("blocked_by", "A") == "blocked-by: A"


def test_lock():
    assert parse("lock", "row") == "row"
    with pytest.raises(BadValue, match="lock must be one of: row, relation, virtualxid, transactionid, metadata, "
                                       "advisory, got 'rows'"):
        parse("lock", "rows")
    tuple_wait = LockInfo("tuple", "ExclusiveLock", "accounts", "id=1")
    res = StatementResult("timed_out", locks_seen=(tuple_wait,))
    assert met("lock", "row", record(res)) == (True, "a wait on row (accounts id=1 ExclusiveLock)")
    assert met("lock", "relation", record(StatementResult("ok", lock=LockInfo("table", relation="t"))))[0] is True
    assert met("lock", "row", record()) == (False, "never reported waiting on a lock")
    assert describe("lock", "row") == "lock: row"


def test_txn():
    assert parse("txn", "in transaction") == "in transaction"
    with pytest.raises(BadValue, match="txn must be one of: idle, in transaction, failed transaction"):
        parse("txn", "closed")
    assert met("txn", "idle", record(txn_after="idle")) == (True, "idle")
    assert met("txn", "idle", record()) == (False, "unknown")
    assert describe("txn", "failed transaction") == "txn: failed transaction"


def test_took():
    assert parse("took", "<= budget + 50ms") == TimeBound("<=", 50, True)
    assert parse("took", "> 1.5s") == TimeBound(">", 1500, False)
    assert parse("took", "< budget") == TimeBound("<", 0, True)
    with pytest.raises(BadValue, match="took: expected a bound like"):
        parse("took", "about a second")
    fast = StatementResult("ok", elapsed_ns=5_000_000)
    assert met("took", TimeBound("<", 20, False), record(fast)) == (True, "took 5.0 ms")
    assert met("took", TimeBound("<=", 50, True), record(fast)) == \
        (False, "took 5.0 ms and no wait budget was in force")
    timed = StatementResult("timed_out", elapsed_ns=1_020_000_000, budget=Budget("lock_timeout", 1000))
    assert met("took", TimeBound("<=", 50, True), record(timed)) == \
        (True, "took 1020.0 ms (budget lock_timeout = 1000 ms)")
    assert describe("took", TimeBound("<=", 50, True)) == "took: <= budget + 50ms"


# the verifier, the reader and the writer use the same keys ----------------------------


def test_verifier_reports_through_the_key():
    exp = Expectation("outcome", "refused", "postgres")
    failures = check(record(StatementResult("ok")), [exp])
    assert failures == ["step 1 (A> SELECT 1;): expected expect[postgres]: refused, got ok"]


def test_verifier_unknown_key():
    assert check(record(), [Expectation("colour", "red")]) == \
        ["step 1 (A> SELECT 1;): expected colour: red, got unknown expectation colour"]


def test_reader_unknown_key_error_is_unchanged():
    known = ", ".join(EXPECT_KEYS)
    with pytest.raises(ScenarioError) as info:
        parse_scenario("engines: postgres\nA> SELECT 1;\n    colour: red\n")
    assert str(info.value) == f"<input>:3: unknown expectation 'colour' (known: {known})"


def test_reader_reports_a_bad_value_at_its_line():
    with pytest.raises(ScenarioError, match=r":3: lock must be one of"):
        parse_scenario("engines: postgres\nA> SELECT 1;\n    lock: rows\n")


def test_every_key_round_trips_through_the_writer():
    text = """engines: postgres

A> BEGIN;
A> SELECT * FROM t FOR UPDATE;
    expect: ok
    rows: 2
    row: 1 | a
    rows-exactly: 1 | a
    rows-exactly: 2 | b
    tag: SELECT 2
    txn: in transaction
    notice: hello
B> SELECT * FROM t FOR UPDATE SKIP LOCKED;
    expect[postgres]: skipped
    skipped: 2
    code: 55P03
    message: could not obtain lock
    blocked-by: A
    completes-after: 4
    lock: row
    took: <= budget + 50ms
A> COMMIT;
"""
    sc = parse_scenario(text)
    assert [e.value for e in sc.steps[1].expectations if e.key == "rows_exactly"] == [[["1", "a"], ["2", "b"]]]
    again = parse_scenario(write_scenario(sc))
    assert [[(e.key, e.value, e.flavor) for e in s.expectations] for s in again.steps] == \
        [[(e.key, e.value, e.flavor) for e in s.expectations] for s in sc.steps]
    assert {e.key for s in sc.steps for e in s.expectations} == set(KEYS)
