"""Cycles of a wait-for graph (core/waitfor.py), shared by the app's lock view and lockrace locks."""

from lockrace.core.waitfor import cycle_text, find_cycles
from lockrace.locks.model import Client, Snapshot, Wait


def test_each_elementary_cycle_once_from_its_smallest_member():
    edges = [("B", "C"), ("C", "A"), ("A", "B"), ("D", "A"), ("A", "D"), ("E", "A")]
    assert sorted(find_cycles(edges)) == [("A", "B", "C"), ("A", "D")]
    assert find_cycles([("A", "B"), ("B", "C")]) == []
    assert find_cycles([("A", "B"), ("A", "B"), ("B", "A")]) == [("A", "B")]  # a repeated edge counts once
    assert cycle_text(("A", "B", "C")) == "A → B → C → A"


def test_lockrace_locks_finds_the_same_cycles_over_backend_ids():
    def wait(waiter, blocker):
        return Wait(waiter=waiter, blocker=blocker, lock="row accounts (0,1)", mode="ShareLock", waiting_ms=1.0)

    snap = Snapshot(server="PostgreSQL 18.6", where="local", clients=[Client(ident=i) for i in (10, 20, 30)],
                    waits=[wait(20, 10), wait(10, 20), wait(30, 10), wait(30, None)])
    assert snap.cycles() == [[10, 20]]
