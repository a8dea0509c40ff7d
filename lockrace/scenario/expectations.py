"""Every expectation key a step may carry: how it is read, checked and shown.

One class per key.  ``parse`` turns the text after ``key:`` into the value an
``Expectation`` holds (or raises ``BadValue`` with the message the reader
reports), ``check`` compares that value with what happened to the step
(``engine.verify.StepRecord``) and says what was seen, ``show`` writes the
value back as a ``.race`` line does.  The reader (``text_format``), the
verifier (``engine.verify``), ``Expectation.describe`` and the writer all go
through ``KEYS``; a key not in it is unknown everywhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from ..core.events import REPLAY_ALIAS, REPLAY_PROCESS
from ..core.outcome import Outcome
from ..core.states import LockKind, TxnState
from .errors import printable

if TYPE_CHECKING:
    from ..core.events import LockInfo
    from ..engine.verify import StepRecord

OUTCOMES: tuple[Outcome, ...] = tuple(Outcome)
"""What ``expect:`` may name: every way a statement can end."""

TXN_STATES: tuple[TxnState, ...] = (TxnState.IDLE, TxnState.IN_TRANSACTION, TxnState.FAILED_TRANSACTION)
"""What ``txn:`` may name (a closed connection is reported, never expected)."""

LOCK_KINDS: tuple[LockKind, ...] = tuple(LockKind)
"""What ``lock:`` may name: the kind of lock a step waited on, as the server reported it."""


class BadValue(ValueError):
    """A value the key cannot take; the message is what the reader reports."""


@dataclass(frozen=True)
class TimeBound:
    """``took: <= budget + 50ms``: a bound on a step's time, absolute or relative
    to the wait budget in force for it."""

    op: str  # <=, <, >=, >
    ms: float  # the constant part
    relative: bool  # budget + ms

    def __str__(self) -> str:
        if not self.relative:
            return f"{self.op} {self.ms:g}ms"
        if self.ms == 0:
            return f"{self.op} budget"
        sign = "+" if self.ms > 0 else "-"
        return f"{self.op} budget {sign} {abs(self.ms):g}ms"

    def limit(self, budget_ms: float | None) -> float | None:
        if not self.relative:
            return self.ms
        return None if budget_ms is None else budget_ms + self.ms

    def holds(self, took_ms: float, budget_ms: float | None) -> bool:
        limit = self.limit(budget_ms)
        if limit is None:
            return False
        return {"<=": took_ms <= limit, "<": took_ms < limit, ">=": took_ms >= limit, ">": took_ms > limit}[self.op]


def cell(value: object) -> str:
    """A result cell as scenario files write it."""
    return "NULL" if value is None else str(value)


def _cells(value: str) -> list[str]:
    return [c.strip() for c in value.split("|")]


def _rows_text(rows: list[list[str]]) -> str:
    return "; ".join(" | ".join(r) for r in rows)


class Key:
    """One expectation key.  ``name`` is the ``Expectation.key``, ``word`` what a
    ``.race`` file writes before the colon."""

    name: ClassVar[str]
    word: ClassVar[str]
    help: ClassVar[str]
    accumulates: ClassVar[bool] = False
    """Successive lines of this key (same flavor) add to one expectation."""

    def parse(self, value: str, steps_so_far: int) -> object:
        """The value from the text after ``key:`` (already stripped);
        ``steps_so_far``: how many steps the file had up to this one."""
        if not value:
            raise BadValue(f"'{self.word}' needs a value")
        return value

    def check(self, want: object, record: StepRecord) -> tuple[bool, str]:
        """Was it met, and what the step showed instead."""
        raise NotImplementedError

    def show(self, value: object) -> str:
        """The value as one line of text (``Expectation.describe``)."""
        return " | ".join(value) if isinstance(value, list) else str(value)

    def lines(self, value: object) -> list[str]:
        """The value as the ``.race`` writer puts it: one entry per ``key:`` line."""
        return [self.show(value)]

    def reference_problem(self, value: object, step_number: int, step_count: int, sessions: set[str]) -> str | None:
        """Once the whole file is read: what the value names that does not exist."""
        return None


def _result(record: StepRecord):
    res = record.result
    assert res is not None, "checked only once the step finished"
    return res


class OutcomeKey(Key):
    name, word, help = "outcome", "expect", "ok, timed_out, refused, skipped, deadlock, ... (several: a | b)"

    def parse(self, value: str, steps_so_far: int) -> object:
        for one in (v.strip() for v in value.split("|")):
            if one not in OUTCOMES:
                raise BadValue(f"unknown outcome '{printable(one)}' (known: {', '.join(OUTCOMES)})")
        return " | ".join(v.strip() for v in value.split("|"))

    def check(self, want: object, record: StepRecord) -> tuple[bool, str]:
        res = _result(record)
        detail = f" ({res.code}: {res.message})" if res.code else ""
        return res.outcome in [w.strip() for w in str(want).split("|")], f"{res.outcome}{detail}"


class CodeKey(Key):
    name, word, help = "code", "code", "SQLSTATE (55P03) or MySQL errno (1205)"

    def parse(self, value: str, steps_so_far: int) -> object:
        if not re.fullmatch(r"[0-9A-Z]{5}|[0-9]{1,5}", value):
            raise BadValue(f"code must be a SQLSTATE (55P03) or a MySQL errno (1205), got {value!r}")
        return value

    def check(self, want: object, record: StepRecord) -> tuple[bool, str]:
        res = _result(record)
        return res.code == str(want), res.code or "no error"


class MessageKey(Key):
    name, word, help = "message", "message", "the server's exact primary message"

    def check(self, want: object, record: StepRecord) -> tuple[bool, str]:
        res = _result(record)
        return res.message == want, repr(res.message) if res.message else "no message"


class _Count(Key):
    """A whole number (ASCII digits, at most nine of them)."""

    def parse(self, value: str, steps_so_far: int) -> object:
        if not re.fullmatch(r"[0-9]+", value):  # ASCII digits only: str.isdigit() takes '²' too
            raise BadValue(f"'{self.word}' needs a whole number (digits 0-9), got {value!r}")
        if len(value.lstrip("0")) > 9:
            raise BadValue(f"'{self.word}' is too large: {value[:20]}...")
        return int(value)


class RowsKey(_Count):
    name, word, help = "rows", "rows", "number of rows returned"

    def check(self, want: object, record: StepRecord) -> tuple[bool, str]:
        res = _result(record)
        n = res.total_rows if res.has_rows else None
        return n == want, "no result set" if n is None else str(n)


class RowKey(Key):
    name, word, help = "row", "row", "one expected row, cells split on |"

    def parse(self, value: str, steps_so_far: int) -> object:
        return _cells(value)

    def check(self, want: object, record: StepRecord) -> tuple[bool, str]:
        rows = [[cell(v) for v in r] for r in _result(record).rows]
        return want in rows, "rows " + _rows_text(rows) if rows else "no rows"


class TagKey(Key):
    name, word, help = "tag", "tag", "command tag, e.g. UPDATE 1"

    def check(self, want: object, record: StepRecord) -> tuple[bool, str]:
        res = _result(record)
        return res.tag == want, repr(res.tag)


class BlockedByKey(Key):
    name, word, help = "blocked_by", "blocked-by", \
        "the server reports this step waiting on that session (\"nobody\": never waiting)"

    @staticmethod
    def _names(value: object) -> list[str]:
        return [n for n in re.split(r"[,\s]+", str(value)) if n]

    def check(self, want: object, record: StepRecord) -> tuple[bool, str]:
        res = _result(record)
        names = self._names(want)
        if names == ["nobody"]:  # the server never reported this step waiting
            return not record.was_blocked, f"blocked by {', '.join(record.blockers) or 'another transaction'}" \
                if record.was_blocked else "never reported blocked"
        names = [REPLAY_PROCESS if n == REPLAY_ALIAS else n for n in names]
        # every blocker the server reported while this step waited, not only the last set
        seen = tuple(dict.fromkeys(res.blockers_seen + record.blockers))
        ok = record.was_blocked and all(n in seen for n in names)
        return ok, f"blocked by {', '.join(seen)}" if record.was_blocked else "never reported blocked"

    def reference_problem(self, value: object, step_number: int, step_count: int, sessions: set[str]) -> str | None:
        if str(value) == "nobody":
            return None
        for who in self._names(value):
            if who not in sessions and who != REPLAY_ALIAS:  # replay: a hot standby's startup process
                return f"blocked-by: no session named {printable(who)}"
        return None


class CompletesAfterKey(_Count):
    name, word, help = "completes_after", "completes-after", "finishes only after step N ran"

    def parse(self, value: str, steps_so_far: int) -> object:
        number = super().parse(value, steps_so_far)
        assert isinstance(number, int)
        if not 1 <= number <= steps_so_far + 1000:
            raise BadValue("completes-after needs a step number")
        return number

    def check(self, want: object, record: StepRecord) -> tuple[bool, str]:
        assert isinstance(want, int)
        return record.launched_before_finish >= want, f"finished after step {record.launched_before_finish}"

    def reference_problem(self, value: object, step_number: int, step_count: int, sessions: set[str]) -> str | None:
        assert isinstance(value, int)
        if not step_number < value <= step_count:
            return f"completes-after: {value} must name a later step (up to {step_count})"
        return None


class TxnKey(Key):
    name, word, help = "txn", "txn", "transaction state afterwards"

    def parse(self, value: str, steps_so_far: int) -> object:
        if value not in TXN_STATES:
            raise BadValue(f"txn must be one of: {', '.join(TXN_STATES)}")
        return value

    def check(self, want: object, record: StepRecord) -> tuple[bool, str]:
        return record.txn_after == want, record.txn_after or "unknown"


class SkippedKey(_Count):
    name, word, help = "skipped", "skipped", "how many rows SKIP LOCKED passed over"

    def check(self, want: object, record: StepRecord) -> tuple[bool, str]:
        res = _result(record)
        return res.skipped_rows == want, str(res.skipped_rows)


class RowsExactlyKey(Key):
    name, word, help = "rows_exactly", "rows-exactly", \
        "the whole result, in order: one line per row, cells split on |"
    accumulates = True

    def parse(self, value: str, steps_so_far: int) -> object:
        # one line per row, in order: the lines together are the whole result
        if value.strip() == "":
            raise BadValue("'rows-exactly' needs a row (cells split on |); an empty result is 'rows: 0'")
        return [_cells(value)]

    def check(self, want: object, record: StepRecord) -> tuple[bool, str]:
        res = _result(record)
        if res.truncated:  # lockrace kept only the first rows: the whole set cannot be compared
            return False, f"{res.total_rows} rows, more than lockrace keeps"
        rows = [[cell(v) for v in r] for r in res.rows]
        shown = _rows_text(rows) if rows else ("no rows" if res.has_rows else "no result set")
        return rows == want, f"rows {shown}" if rows else shown

    def show(self, value: object) -> str:
        assert isinstance(value, list)
        return _rows_text(value)

    def lines(self, value: object) -> list[str]:
        assert isinstance(value, list)
        return [" | ".join(row) for row in value]


class NoticeKey(Key):
    name, word, help = "notice", "notice", "a notice or warning the server sent contains this text"

    def check(self, want: object, record: StepRecord) -> tuple[bool, str]:
        res = _result(record)
        said = [n for r in (res.result_sets or [res]) for n in r.notices] or list(res.notices)
        said = list(dict.fromkeys(said + list(res.notices)))
        ok = any(str(want).lower() in n.lower() for n in said)
        return ok, ("; ".join(said) if said else "no notice or warning")


_LOCK_WORD = {"tuple": "row", "record": "row", "table": "relation"}


def lock_kind(lock: LockInfo) -> str:
    """The ``lock:`` word for a lock the server reported: row, relation, virtualxid, ..."""
    return _LOCK_WORD.get(lock.kind, lock.kind)


class LockKey(Key):
    name, word, help = "lock", "lock", "the kind of lock the step waited on (row, relation, virtualxid, ...)"

    def parse(self, value: str, steps_so_far: int) -> object:
        if value not in LOCK_KINDS:
            raise BadValue(f"lock must be one of: {', '.join(LOCK_KINDS)}, got {printable(value)!r}")
        return value

    def check(self, want: object, record: StepRecord) -> tuple[bool, str]:
        res = _result(record)
        locks = res.locks_seen or ((res.lock,) if res.lock else ())
        kinds = [lock_kind(lock) for lock in locks]
        if not kinds:
            return False, "never reported waiting on a lock"
        return want in kinds, "a wait on " + ", ".join(dict.fromkeys(f"{k} ({lock.describe()})"
                                                                      for k, lock in zip(kinds, locks)))


_TOOK_RE = re.compile(r"^(<=|<|>=|>)\s*(?:(budget)(?:\s*([+-])\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s))?"
                      r"|([0-9]+(?:\.[0-9]+)?)\s*(ms|s))$")


class TookKey(Key):
    name, word, help = "took", "took", "a bound on the step's time: <= budget + 50ms, < 20ms"

    def parse(self, value: str, steps_so_far: int) -> object:
        tm = _TOOK_RE.match(value)
        if not tm:
            raise BadValue(f"took: expected a bound like '<= budget + 50ms' or '< 20ms', got {value!r}")
        op = tm.group(1)
        if tm.group(2):
            ms = float(tm.group(4) or 0) * (1000 if tm.group(5) == "s" else 1) * (-1 if tm.group(3) == "-" else 1)
            return TimeBound(op, ms, True)
        return TimeBound(op, float(tm.group(6)) * (1000 if tm.group(7) == "s" else 1), False)

    def check(self, want: object, record: StepRecord) -> tuple[bool, str]:
        assert isinstance(want, TimeBound)
        res = _result(record)
        took = f"took {res.elapsed_ms:.1f} ms"
        if not want.relative:
            return want.holds(res.elapsed_ms, res.budget.ms if res.budget else None), took
        if res.budget is None:
            return False, f"{took} and no wait budget was in force"
        budget = res.budget.ms
        return want.holds(res.elapsed_ms, budget), f"{took} (budget {res.budget.name} = {budget:g} ms)"


KEYS: dict[str, Key] = {k.name: k for k in (
    OutcomeKey(), CodeKey(), MessageKey(), RowsKey(), RowKey(), TagKey(), BlockedByKey(), CompletesAfterKey(),
    TxnKey(), SkippedKey(), RowsExactlyKey(), NoticeKey(), LockKey(), TookKey(),
)}
"""Every expectation key by ``Expectation.key``, in the order the reader lists them."""

BY_WORD: dict[str, Key] = {k.word: k for k in KEYS.values()}
"""The same keys by the word a ``.race`` file writes (``expect``, ``blocked-by``, ...)."""


def describe(key: str, value: object, flavor: str | None = None) -> str:
    """``expect[mariadb]: refused``: an expectation as one line of text."""
    scope = f"[{flavor}]" if flavor else ""
    spec = KEYS.get(key)
    if spec is None:  # not one lockrace knows: shown as given
        return f"{key.replace('_', '-')}{scope}: {value}"
    return f"{spec.word}{scope}: {spec.show(value)}"
