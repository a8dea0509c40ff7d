"""A deadlock, explained: the server's own account of the cycle, with sessions by name.

PostgreSQL tells the victim in its error's DETAIL, one line per member of the cycle:

    Process 4711 waits for ShareLock on transaction 755; blocked by process 4712.

InnoDB (MariaDB, MySQL) keeps the LATEST DETECTED DEADLOCK section of SHOW ENGINE
INNODB STATUS: each transaction of the cycle, the lock it waits for and (MariaDB)
the transaction whose lock it conflicts with, then which one it rolled back.

``explain`` turns either into lines a learner reads (pids and thread ids replaced
by session names) and the cycle, starting at the victim: ``cycle: A → B → C → A``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

_PG_LINE = re.compile(r"Process (\d+) waits for (\S+) on (.+?); blocked by process (\d+)\.?$")
_SECTION = re.compile(r"LATEST DETECTED DEADLOCK\n-+\n(.*?)(?:\n-{4,}\n[A-Z ]+\n-{4,}|\Z)", re.DOTALL)
_TRX = re.compile(r"^\*\*\* \((\d+)\) TRANSACTION:\s*$", re.MULTILINE)
_THREAD = re.compile(r"(?:MariaDB|MySQL) thread id (\d+)")
_TRX_ID = re.compile(r"^TRANSACTION (\d+),", re.MULTILINE)
_LOCK = re.compile(r"^(RECORD LOCKS .*?|TABLE LOCK .*?)$", re.MULTILINE)
_LOCK_TRX = re.compile(r"trx id (\d+)")
_VICTIM = re.compile(r"\*\*\* WE ROLL BACK TRANSACTION \((\d+)\)")
_FIELD0 = re.compile(r"^ 0: len (\d+); hex ([0-9a-f]+);", re.MULTILINE)
_ON = re.compile(r"index (\S+) of table `([^`]*)`\.`([^`]*)`.*?lock_mode (.*?)( waiting)?$")
_TABLE_LOCK = re.compile(r"TABLE LOCK table `([^`]*)`\.`([^`]*)`.*?lock mode (\S+)")


@dataclass
class Explained:
    lines: list[str] = field(default_factory=list)
    cycle: list[str] = field(default_factory=list)  # victim first; the first name again at the end is implied

    def cycle_line(self) -> str:
        return f"cycle: {' → '.join(self.cycle + self.cycle[:1])}" if self.cycle else ""


def _cycle(edges: dict[str, str], start: str) -> list[str]:
    out = [start]
    while edges.get(out[-1]) and edges[out[-1]] not in out:
        out.append(edges[out[-1]])
    return out if edges.get(out[-1]) == start else []


def explain_postgres(detail: str, name: Callable[[int], str], victim: str,
                     changed: Callable[[str], bool] = lambda n: True) -> Explained:
    """PostgreSQL's DETAIL lines with names instead of pids, a learner's note on each
    wait for a transaction, and the cycle (from ``victim``)."""
    out = Explained()
    edges: dict[str, str] = {}
    for raw in (detail or "").splitlines():
        m = _PG_LINE.match(raw.strip())
        if not m:
            continue
        waiter, mode, what, blocker = name(int(m.group(1))), m.group(2), m.group(3), name(int(m.group(4)))
        edges[waiter] = blocker
        line = f"{waiter} waits for {mode} on {what}; blocked by {blocker}."
        if what.startswith("transaction ") and mode == "ShareLock":
            how = "changed" if changed(blocker) else "changed or locked"
            line += f"  ({waiter} waits for {blocker}'s transaction to end: {blocker} {how} a row {waiter} wants)"
        out.lines.append(line)
    out.cycle = _cycle(edges, victim) or (list(edges)[:1] and _cycle(edges, list(edges)[0]))
    return out


def latest_deadlock(status: str) -> str:
    """The LATEST DETECTED DEADLOCK section of SHOW ENGINE INNODB STATUS ('' when none)."""
    m = _SECTION.search(status or "")
    return m.group(1).strip() if m else ""


def _key(block: str) -> str:
    """The locked record's first field (the key of a PRIMARY index), when it is an integer."""
    m = _FIELD0.search(block)
    if not m or m.group(1) not in ("4", "8"):
        return ""
    value = int(m.group(2), 16)
    bits = int(m.group(1)) * 8
    return str(value ^ (1 << (bits - 1)) if value >> (bits - 1) else value - (1 << (bits - 1)))


def _mode_words(mode: str) -> str:
    """InnoDB's 'lock_mode X locks rec but not gap' in words."""
    kind = "exclusive" if mode.startswith("X") else "shared" if mode.startswith("S") else mode.split()[0]
    if "insert intention" in mode:
        return f"{kind}, to insert into the gap"
    if "rec but not gap" in mode:
        return f"{kind}, the row only"
    if "gap before rec" in mode:
        return f"{kind}, the gap before the row"
    return f"{kind}, the row and the gap before it"


def _lock_words(line: str, block: str) -> str:
    m = _ON.search(line)
    if m:
        index, db, table, mode = m.group(1), m.group(2), m.group(3), m.group(4).replace(" waiting", "")
        key = _key(block) if index == "PRIMARY" else ""
        where = f" key {key}" if key else ""
        return f"row {db}.{table} {index}{where} ({_mode_words(mode)})"
    t = _TABLE_LOCK.search(line)
    if t:
        return f"table {t.group(1)}.{t.group(2)} ({t.group(3)})"
    return line.strip()


def explain_innodb(section: str, name: Callable[[int], str], victim_ident: int) -> Explained | None:
    """InnoDB's deadlock summary, one line per transaction, by session name; None when the
    section is not about ``victim_ident`` (a later deadlock elsewhere replaced it)."""
    parts = _TRX.split(section or "")
    # parts: [before, "1", text1, "2", text2, ...]
    trxs: list[tuple[str, int, str, str]] = []  # (number, thread, trx id, text)
    for number, text in zip(parts[1::2], parts[2::2]):
        thread_m = _THREAD.search(text)
        trx_m = _TRX_ID.search(text)
        if thread_m and trx_m:
            trxs.append((number, int(thread_m.group(1)), trx_m.group(1), text))
    victim = _VICTIM.search(section or "")
    if not trxs or not victim:
        return None
    by_number = {n: t for n, t, _, _ in trxs}
    if by_number.get(victim.group(1)) != victim_ident:
        return None
    by_trx = {x: name(t) for _, t, x, _ in trxs}
    out = Explained()
    edges: dict[str, str] = {}
    for i, (number, thread, trx, text) in enumerate(trxs):
        who = name(thread)
        lines = text.splitlines()
        thread_at = next((k for k, line in enumerate(lines) if _THREAD.search(line)), 0)
        query = next((line.strip() for line in lines[thread_at + 1:thread_at + 2]), "")
        waiting_at = text.find("WAITING FOR THIS LOCK TO BE GRANTED")
        after = text[waiting_at:] if waiting_at >= 0 else ""
        locks = _LOCK.findall(after)
        wanted = _lock_words(locks[0], after) if locks else "a lock"
        conflict = text.find("CONFLICTING WITH")
        holder = ""
        if conflict >= 0:  # MariaDB names the transaction whose lock it conflicts with
            held = _LOCK.findall(text[conflict:])
            got = _LOCK_TRX.search(held[0]) if held else None
            holder = by_trx.get(got.group(1), "") if got else ""
        if not holder:  # MySQL lists the cycle in order: each waits for the next
            holder = name(trxs[(i + 1) % len(trxs)][1])
        edges[who] = holder
        out.lines.append(f"{who}: {query} -- waits for {wanted}, held by {holder}")
    victim_name = name(victim_ident)
    out.lines.append(f"InnoDB rolled back {victim_name}'s transaction (the victim)")
    out.cycle = _cycle(edges, victim_name)
    return out
