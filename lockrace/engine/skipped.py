"""Counting the rows a SKIP LOCKED read passed over, and who holds them."""

from __future__ import annotations

import asyncio
from time import perf_counter_ns
from typing import TYPE_CHECKING

from ..backends.base import NoProbe, count_passed_over, skip_probe
from ..core.events import ServerNote, StatementResult
from ..core.outcome import with_skip
from .cleanup import within

if TYPE_CHECKING:
    from .race import Race
    from .session import Session

SKIP_PROBE_ROWS = 1000  # rows beyond a SKIP LOCKED read's LIMIT that its probe may read
CANCEL_S = 5.0  # a skip count the server has not answered by then is given up


class SkipCounter:
    def __init__(self, race: Race):
        self.race = race

    async def count(self, session: Session, sql_text: str, result: StatementResult) -> None:
        """How many rows the SKIP LOCKED read passed over because others lock them,
        and who holds them: the same read without its locking clause, run again on
        lockrace's own monitor connection (never the session's), in a read-only
        transaction that is rolled back, bounded in time.  Where that could change
        anything or give a wrong count, nothing is run and the result says why the
        count is unknown (``skip_unknown``): a read that calls a function, one whose
        limit the probe cannot repeat, a session whose own transaction changed rows
        (PostgreSQL: those changes are seen only from the session's connection).
        MariaDB/MySQL: read as committed and at READ UNCOMMITTED (rows others are
        still inserting are seen there, and InnoDB's SKIP LOCKED passes them over)."""
        race = self.race
        monitor = race.monitor_for(session)
        if monitor is None:
            return
        try:
            sql, limit, table = skip_probe(sql_text, session.dialect.lexer)
            if result.truncated:
                raise NoProbe("the result is too large to compare row by row")
            if not session.dialect.monitor_sees_own_changes and session.wrote_in_txn:
                raise NoProbe("this transaction changed rows itself, which only its own connection sees")
        except NoProbe as why:
            result.skip_unknown = str(why)
            return
        bound = (limit or 0) + SKIP_PROBE_ROWS  # the probe reads a bounded number of rows too
        try:
            # bounded here too: the monitor's own limits need a server that answers
            probe_sql = f"{sql} LIMIT {bound}"
            if not session.dialect.monitor_sees_own_changes:
                seen, latest, own = await within(monitor.plain_read(probe_sql), CANCEL_S), None, 0
            else:
                seen, latest = await within(monitor.skip_reads(probe_sql), CANCEL_S)
                own = int(session.wrote_in_txn)
            if seen is None:
                result.skip_unknown = "the server did not answer the count's read"
                return
            for rows in (seen, latest or []):
                if len(rows) >= bound and (limit is None or not result.rows or result.rows[-1] not in rows):
                    # the probe stopped short of what the read passed: no count rather than a wrong one
                    result.skip_unknown = f"more than {bound} rows to compare"
                    return
            result.skipped_rows = count_passed_over(seen, result.rows, limit, latest, own)
            if result.skipped_rows and table:
                holders = await within(monitor.row_lock_holders(table, session.ident), CANCEL_S)
                result.skipped_from = tuple(sorted(race.holder_name(i, session.node) for i in holders.holders))
        except asyncio.TimeoutError:
            result.skip_unknown = "the server did not answer the count's read in time"
            race.emit(ServerNote(session.name, perf_counter_ns(), "could not count skipped rows: the server did not answer",
                                 "warning", node=session.node))
            return
        except Exception as exc:
            result.skip_unknown = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            race.emit(ServerNote(session.name, perf_counter_ns(), f"could not count skipped rows: {exc}", "warning",
                                 node=session.node))
            return
        result.outcome = with_skip(result.outcome, sql_text, result.skipped_rows)
