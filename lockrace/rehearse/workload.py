"""The traffic around a migration: bystander clients and the long transaction.

A bystander is a plain thread with a connection of its own that runs the
workload's statements one after another (autocommit, each a line of the
workload picked at random, ``:id`` a random key) and records, for every one,
when it started and how long the caller waited for the server's answer:
``time.perf_counter_ns()`` right before and right after the driver call.

The long transaction reads the table once (PostgreSQL: ACCESS SHARE on it;
MariaDB/MySQL: a shared metadata lock), keeps its transaction open for the
hold and commits: the reader that a migration waits for in production.
"""

from __future__ import annotations

import random
import threading
from array import array
from time import perf_counter_ns

from .sqlfile import key_parts


class Bystander(threading.Thread):
    def __init__(self, index: int, conn, workload: list[str], keys: int, origin_ns: int, stop: threading.Event,
                 rng: int | None = None):
        super().__init__(name=f"lockrace-bystander-{index}", daemon=True)
        self.conn = conn
        self.templates = [key_parts(s) for s in workload]
        self.keys = keys
        self.origin_ns = origin_ns
        self.stop_event = stop
        self.rnd = random.Random(rng)
        self.starts = array("q")  # ns since the rehearsal's origin
        self.waits = array("q")  # ns the caller waited for the answer
        self.errors = 0
        self.failures: dict[str, int] = {}  # error sentence -> how many (the first few kinds)
        self.lost = False

    def run(self) -> None:
        run = self.conn.run
        templates, n, keys, rnd = self.templates, len(self.templates), self.keys, self.rnd
        starts, waits, origin = self.starts, self.waits, self.origin_ns
        stop = self.stop_event
        while not stop.is_set():
            parts = templates[rnd.randrange(n)] if n > 1 else templates[0]
            sql = str(rnd.randint(1, keys)).join(parts) if len(parts) > 1 else parts[0]
            t0 = perf_counter_ns()
            failure = run(sql)
            t1 = perf_counter_ns()
            if failure is not None and stop.is_set():
                break  # ended by the rehearsal's own stop: not the bystander's error
            starts.append(t0 - origin)
            waits.append(t1 - t0)
            if failure is not None:
                self.errors += 1
                text = failure.sentence()
                if text in self.failures or len(self.failures) < 5:
                    self.failures[text] = self.failures.get(text, 0) + 1
                if failure.lost:
                    self.lost = True
                    break


class LongTransaction(threading.Thread):
    """BEGIN; SELECT 1 FROM table LIMIT 1; ... hold ...; COMMIT."""

    def __init__(self, conn, table: str, hold_ms: int, origin_ns: int, stop: threading.Event, quote: str = '"'):
        super().__init__(name="lockrace-long-transaction", daemon=True)
        self.conn = conn
        self.read_sql = f"SELECT 1 FROM {quote}{table}{quote} LIMIT 1"
        self.hold_ns = hold_ms * 1_000_000
        self.origin_ns = origin_ns
        self.stop_event = stop
        self.holding = threading.Event()  # set once the lock is held (or the read failed)
        self.held_from_ns: int | None = None
        self.held_until_ns: int | None = None
        self.failure = None

    def run(self) -> None:
        failure = self.conn.run("BEGIN") or self.conn.run(self.read_sql)
        if failure is not None:
            self.failure = failure
            self.holding.set()
            return
        self.held_from_ns = perf_counter_ns() - self.origin_ns
        self.holding.set()
        self.stop_event.wait(self.hold_ns / 1e9)
        self.conn.run("COMMIT")
        self.held_until_ns = perf_counter_ns() - self.origin_ns
