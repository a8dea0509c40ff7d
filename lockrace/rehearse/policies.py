"""Policies: how a migration asks for its lock.

A policy is written as parts joined by ``+``:

* ``none``: plain DDL, no lock budget (the migration waits as long as it takes,
  and every later statement on the table queues behind it);
* ``lock_timeout=100ms`` (PostgreSQL) / ``lock_wait_timeout=1`` (MySQL/MariaDB,
  whole seconds): a lock budget per attempt;
* ``retry`` or ``retry=N``: after an attempt runs out of budget, try again, up to
  N attempts (default ``DEFAULT_ATTEMPTS``), sleeping an exponentially growing
  delay between attempts (``BASE_DELAY_MS`` doubled each time, at most
  ``MAX_DELAY_MS``) with jitter: a random part of the second half of it;
* ``concurrently`` (PostgreSQL): CREATE INDEX / DROP INDEX / REINDEX run
  CONCURRENTLY; ``instant`` (MySQL/MariaDB): ALTER TABLE ... ALGORITHM=INSTANT;
* presets ``strong_migrations`` and ``pgroll``: the lock budget and retry those
  tools apply by default (see ``PRESETS``).
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass

from ..dialects import family_dialect

DEFAULT_ATTEMPTS = 10
BASE_DELAY_MS = 100.0
MAX_DELAY_MS = 5000.0


class PolicyError(ValueError):
    """A policy lockrace cannot rehearse: one sentence."""


@dataclass(frozen=True)
class Backoff:
    """The sleep before attempt ``n + 1`` after attempt ``n`` (1-based) ran out of budget."""

    kind: str  # "exponential" (jitter in the second half), "full-jitter" (pgroll), "constant"
    base_ms: float
    cap_ms: float

    def delay_ms(self, n: int, rnd: random.Random) -> float:
        if self.kind == "constant":
            return self.base_ms
        step = min(self.cap_ms, self.base_ms * 2 ** (n - 1))
        if self.kind == "full-jitter":
            return rnd.uniform(0, step)
        return rnd.uniform(step / 2, step)

    def describe(self) -> str:
        if self.kind == "constant":
            return f"{_dur(self.base_ms)} between attempts"
        if self.kind == "full-jitter":
            return (f"a random sleep below {_dur(self.base_ms)} x 2^n between attempts (at most {_dur(self.cap_ms)})")
        return (f"backoff {_dur(self.base_ms)}, doubling up to {_dur(self.cap_ms)}, with jitter")


@dataclass(frozen=True)
class Policy:
    name: str  # as written (the table's first column, the JSON's "policy")
    budget_ms: float | None = None  # the lock budget of one attempt; None: none
    attempts: int | None = 1  # how many attempts at most; None: no limit (until the rehearsal ends)
    backoff: Backoff | None = None
    variant: str | None = None  # "concurrently" | "instant"
    preset: str | None = None  # "strong_migrations" | "pgroll"

    @property
    def retries(self) -> bool:
        return self.attempts is None or self.attempts > 1

    def budget_sql(self, engine: str, local: bool = False) -> str:
        """The statement that sets this policy's lock budget on the migration's connection."""
        return family_dialect(engine).ddl_budget_sql(self.budget_ms, local)

    def describe(self, engine: str) -> str:
        """In words, for the verdict: 'with lock_timeout 100 ms and up to 10 attempts'."""
        setting = family_dialect(engine).ddl_lock_setting
        variant = {"concurrently": "CONCURRENTLY", "instant": "ALGORITHM=INSTANT"}.get(self.variant or "", "")
        if self.preset == "strong_migrations":
            core = (f"with strong_migrations' defaults ({setting} {_dur(self.budget_ms)}, "
                    f"{'no retries' if not self.retries else f'{(self.attempts or 1) - 1} retries'})")
        elif self.preset == "pgroll":
            core = f"with pgroll's defaults ({setting} {_dur(self.budget_ms)}, retried with full-jitter backoff)"
        elif self.budget_ms is None:
            core = "without a lock budget"
        else:
            core = f"with {setting} {_dur(self.budget_ms)}"
            if self.attempts is None:
                core += " and retries"
            elif self.attempts > 1:
                core += f" and up to {self.attempts} attempts"
        if not variant:
            return core
        if self.budget_ms is None and self.preset is None:
            return f"with {variant} and no lock budget"
        return f"with {variant}, {core[len('with '):] if core.startswith('with ') else core}"


# The documented defaults of the tools, as facts:
#  strong_migrations (github.com/ankane/strong_migrations): the gem sets no lock timeout by
#  itself; the initializer its generator writes (and its README) sets
#  StrongMigrations.lock_timeout = 10.seconds (PostgreSQL lock_timeout; on MySQL/MariaDB it
#  sets lock_wait_timeout, in seconds).  lock_timeout_retries defaults to 0 and
#  lock_timeout_retry_delay to 10 seconds (a constant delay); a retry reruns the whole
#  migration's transaction.
#  pgroll (github.com/xataio/pgroll, PostgreSQL only): --lock-timeout defaults to 500 ms; a
#  statement that fails with lock_not_available (55P03) is retried without a limit, sleeping
#  a random time below 1 s x 2^n (the n-th retry), at most 1 minute (cloudflare/backoff with
#  full jitter).
PRESETS: dict[str, Policy] = {
    "strong_migrations": Policy("strong_migrations", budget_ms=10_000.0, attempts=1,
                                backoff=Backoff("constant", 10_000.0, 10_000.0), preset="strong_migrations"),
    "pgroll": Policy("pgroll", budget_ms=500.0, attempts=None,
                     backoff=Backoff("full-jitter", 1000.0, 60_000.0), preset="pgroll"),
}
# what a policy word names that only one family has, in the words of the refusal
VARIANTS = {"concurrently": "concurrently is PostgreSQL's", "instant": "instant is MySQL/MariaDB's ALGORITHM=INSTANT"}
PRESET_HOMES = {"pgroll": "PostgreSQL", "strong_migrations": ""}  # "": every family


def _dur(ms: float | None) -> str:
    if ms is None:
        return "none"
    if ms >= 1000 and ms % 1000 == 0:
        return f"{ms / 1000:g} s"
    return f"{ms:g} ms"


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|min)?$")


def _budget(part: str, engine: str) -> float:
    key, _, value = part.partition("=")
    key = key.strip().lower()
    value = value.strip().lower()
    dialect = family_dialect(engine)
    setting, example = dialect.ddl_lock_setting, dialect.ddl_lock_example
    if key != setting:
        kind = "metadata-lock budget" if dialect.tracks_metadata_locks else "lock budget"
        seconds = ", in whole seconds" if dialect.ddl_lock_whole_seconds else ""
        raise PolicyError(f"{part}: {dialect.label}'s {kind} is {setting}{seconds} (for example {example})")
    m = _DURATION.match(value)
    if not m:
        raise PolicyError(f"{part}: not a duration (write it like 100ms or 2s)")
    number, unit = float(m.group(1)), m.group(2)
    if dialect.ddl_lock_whole_seconds:
        if unit == "ms" or (unit is None and not number.is_integer()) or (unit == "s" and not number.is_integer()):
            raise PolicyError(f"{part}: {setting} takes whole seconds on {dialect.label} (for example "
                              f"{example})")
        ms = number * (60_000 if unit == "min" else 1000)
    else:
        ms = number * {"ms": 1, "s": 1000, "min": 60_000}.get(unit or "ms", 1)
    if not math.isfinite(ms) or ms <= 0:
        raise PolicyError(f"{part}: a lock budget must be more than 0 (use none for no budget)")
    return ms


def parse_policy(text: str, engine: str) -> Policy:
    """One policy as written (see the module's docstring); PolicyError says what is wrong."""
    name = text.strip()
    if not name:
        raise PolicyError("an empty policy in --policies")
    parts = [p.strip() for p in name.split("+")]
    dialect = family_dialect(engine)
    budget: float | None = None
    attempts: int | None = 1
    variant: str | None = None
    preset: Policy | None = None
    for part in parts:
        low = part.lower()
        if low in PRESETS:
            if low not in dialect.migration_presets:
                raise PolicyError(f"{part} runs on {PRESET_HOMES[low]} only")
            preset = PRESETS[low]
        elif low == "none":
            continue
        elif low in VARIANTS:
            if low != dialect.online_ddl:
                raise PolicyError(f"{VARIANTS[low]} (on {dialect.label} try {dialect.online_ddl})")
            variant = low
        elif low.startswith(("lock_timeout=", "lock_wait_timeout=")):
            budget = _budget(part, engine)
        elif low == "retry":
            attempts = DEFAULT_ATTEMPTS
        elif low.startswith("retry="):
            value = low.partition("=")[2]
            if not value.isdigit() or int(value) < 1:
                raise PolicyError(f"{part}: the number of attempts must be a whole number of at least 1")
            attempts = int(value)
        else:
            where = f"unknown policy {part!r}" if part == name else f"unknown policy part {part!r} in {name!r}"
            raise PolicyError(f"{where} (known: none, lock_timeout=100ms, "
                              "lock_wait_timeout=1, retry, retry=N, concurrently, instant, strong_migrations, pgroll)")
    if preset is not None:
        if budget is not None or attempts != 1:
            raise PolicyError(f"{name}: {preset.name} brings its own lock budget and retry; give it alone "
                              "(or with concurrently / instant)")
        return Policy(name, preset.budget_ms, preset.attempts, preset.backoff, variant, preset.preset)
    if attempts != 1 and budget is None:
        raise PolicyError(f"{name}: retry needs a lock budget to run out of (add lock_timeout=... or "
                          "lock_wait_timeout=...)")
    backoff = Backoff("exponential", BASE_DELAY_MS, MAX_DELAY_MS) if attempts != 1 else None
    return Policy(name, budget, attempts, backoff, variant)


def parse_policies(text: str, engine: str) -> list[Policy]:
    policies = [parse_policy(part, engine) for part in text.split(",")]
    seen: set[str] = set()
    for p in policies:
        if p.name in seen:
            raise PolicyError(f"the policy {p.name} is given twice")
        seen.add(p.name)
    return policies


def default_policies(engine: str) -> list[Policy]:
    """What a rehearsal compares when --policies is not given (variants are added by
    the caller where the migration allows them)."""
    return [parse_policy(n, engine) for n in family_dialect(engine).default_policies]
