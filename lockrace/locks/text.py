"""The wait-for forest as text: each waiter under what blocks it.

    PostgreSQL 18.1 at host=/tmp/... -- 3 sessions, 2 waits
    pid 4711  alice  psql  idle in transaction 12.0 s  UPDATE accounts SET ...
    ├── pid 4712  bob  app  active  waiting 2.1 s  ALTER TABLE accounts ...
    │     waits for a holder: relation accounts: ACCESS EXCLUSIVE requested; ...
    │   └── pid 4713 ...
    │         queued behind pid 4712's pending request: ...
"""

from __future__ import annotations

from .model import Client, Snapshot


def seconds(ms: float | None) -> str:
    if ms is None:
        return ""
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


def client_line(c: Client | None, label: str) -> str:
    if c is None:
        return label
    parts = [c.label if not c.name or c.kind in ("prepared", "process") else f"{c.name} ({c.default_label})"]
    parts += [p for p in (c.user, c.application, c.state) if p]
    if c.waiting_ms is not None:
        parts.append(f"waiting {seconds(c.waiting_ms)}")
    elif c.xact_ms is not None:
        parts.append(f"transaction open {seconds(c.xact_ms)}")
    line = "  ".join(parts)
    if c.query:
        query = c.query if len(c.query) <= 70 else c.query[:69] + "…"
        line += f"  {query}"
    return line


def lines(snap: Snapshot) -> list[str]:
    sessions = [c for c in snap.clients if c.kind in ("client", "thread") and not c.system]
    node = f" (node {snap.node})" if snap.node else ""
    head = (f"{snap.server}{node} at {snap.where}: {len(sessions)} client session{'s' if len(sessions) != 1 else ''}, "
            f"{len(snap.waits)} lock wait{'s' if len(snap.waits) != 1 else ''}")
    out = [head]
    out += [f"  note: {n}" for n in snap.notes]
    if not snap.waits:
        out.append("  nobody waits for a lock")
        return out
    cycles = snap.cycles()
    for cycle in cycles:
        names = [snap.label(i) for i in cycle]
        out.append(f"  deadlock forming: cycle: {' → '.join(names + names[:1])} (the server's deadlock check ends it)")
    shown: set[int | None] = set()

    def draw(ident: int | None, prefix: str, path: tuple) -> None:
        kids = [w for w in snap.waits if w.blocker == ident] if ident is not None else []
        for n, w in enumerate(sorted(kids, key=lambda w: w.waiter)):
            last = n == len(kids) - 1
            branch, more = ("└── ", "    ") if last else ("├── ", "│   ")
            c = snap.client(w.waiter)
            others = [snap.label(x.blocker) for x in snap.waits_of(w.waiter) if x.blocker != ident]
            also = f"  (also blocked by {', '.join(others)})" if others else ""
            kind = "queued behind another waiter's pending request" if w.queued else "waits for a holder"
            if w.waiter in path:
                out.append(f"{prefix}{branch}{snap.label(w.waiter)}  ↺ back to the start of the cycle")
                out.append(f"{prefix}{more}  {kind}: {w.words or w.lock}")
                continue
            if w.waiter in shown:  # several blockers: drawn in full under the first one only
                out.append(f"{prefix}{branch}{snap.label(w.waiter)}  (drawn above)")
            else:
                out.append(f"{prefix}{branch}{client_line(c, snap.label(w.waiter))}{also}")
            out.append(f"{prefix}{more}  {kind}: {w.words or w.lock}")
            if w.waiter not in shown:
                shown.add(w.waiter)
                draw(w.waiter, prefix + more, path + (w.waiter,))

    for top in snap.roots():
        if top is None:
            continue
        out.append(client_line(snap.client(top), snap.label(top)))
        shown.add(top)
        draw(top, "", (top,))
    for w in [w for w in snap.waits if w.blocker is None]:  # the server does not say who holds it
        out.append(f"{client_line(snap.client(w.waiter), snap.label(w.waiter))}")
        out.append(f"      waits for an unnamed holder: {w.words or w.lock}")
        if w.waiter not in shown:
            shown.add(w.waiter)
            draw(w.waiter, "", (w.waiter,))
    return out
