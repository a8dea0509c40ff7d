"""A snapshot as JSON: ``{"waits": [{"waiter", "blocker", "lock", "mode", "waiting_ms", ...}], "sessions": [...]}``."""

from __future__ import annotations

from .model import Snapshot


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def snapshot_dict(snap: Snapshot) -> dict:
    return {
        "server": snap.server,
        "where": snap.where,
        "node": snap.node or None,
        "waits": [{
            "waiter": w.waiter,
            "blocker": w.blocker,
            "lock": w.lock,
            "mode": w.mode,
            "waiting_ms": _ms(w.waiting_ms),
            "kind": w.kind,
            "queued": w.queued,  # true: behind the blocker's own pending request, not a lock it holds
            "blocker_holds": w.held or None,
            "explain": w.words,
        } for w in snap.waits],
        "sessions": [{
            "pid": c.ident,
            "name": c.name or None,
            "user": c.user,
            "application": c.application,
            "state": c.state,
            "query": c.query,
            "waiting_ms": _ms(c.waiting_ms),
            "transaction_ms": _ms(c.xact_ms),
            "backend": c.kind,
        } for c in snap.clients],
        "cycles": [list(c) for c in snap.cycles()],
        "notes": snap.notes,
    }
