"""Product text speaks to users about PostgreSQL, MariaDB/MySQL and lockrace only:
no word of how lockrace was made (its sources of study, its work items) in the
package, the scenario files, the README, the benches, the scripts or --help."""

from __future__ import annotations

import re

from lockrace.cli import build_parser
from lockrace.render.transcript import names_text
from support.paths import REPO

INTERNAL = re.compile(r"\bseeds?\b|\bseeds'|\bissues?\s*#?\d+", re.IGNORECASE)  # 'lockrace issues a statement' is fine
ALLOWED = re.compile(r"hypothesis|random", re.IGNORECASE)


def product_files():
    for folder, pattern in (("lockrace", "*.py"), ("lockrace", "*.tcss"), ("lockrace", "*.md"),
                            ("scenarios", "*.race"), ("bench", "*.py"), ("scripts", "*.py")):
        yield from sorted((REPO / folder).rglob(pattern))
    yield REPO / "README.md"
    yield REPO / "CONTRIBUTING.md"
    yield from sorted((REPO / "docs").rglob("*.md"))


def test_no_internal_wording_in_product_text():
    hits = []
    for path in product_files():
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if INTERNAL.search(line) and not ALLOWED.search(line):
                hits.append(f"{path.relative_to(REPO)}:{lineno}: {line.strip()}")
    assert hits == []


def test_no_internal_wording_in_help():
    parser = build_parser()
    texts = [parser.format_help()]
    for action in parser._subparsers._group_actions:  # every subcommand's own --help
        texts.extend(sub.format_help() for sub in action.choices.values())
    for text in texts:
        assert not INTERNAL.search(text), text


def test_scenario_sources_name_public_references():
    for path in sorted((REPO / "scenarios").glob("*.race")):
        source = next((line for line in path.read_text().splitlines() if line.startswith("source:")), None)
        assert source is not None, f"{path.name} names no source"
        assert re.search(r"PostgreSQL|MariaDB|MySQL", source), source


def test_names_read_as_english():
    assert names_text(["A"]) == "A"
    assert names_text(["B", "C"]) == "B and C"
    assert names_text(["B", "C", "D"]) == "B, C and D"
    assert names_text([]) == "another transaction"


def test_wait_line_agrees_with_several_blockers():
    """The counter under a badge, fed the engine's own events (several sessions ahead in the queue)."""
    from lockrace.app.status import SessionStatus
    from lockrace.core.events import LockInfo, StatementBlocked, StatementStarted

    status = SessionStatus("D")
    status.apply(StatementStarted("D", 1_000, 7, "LOCK TABLE accounts;", None))
    status.apply(StatementBlocked("D", 2_000, 7, ("B", "C"), LockInfo("relation", "AccessExclusiveLock", "accounts")))
    assert status.wait_line(now_ns=1_000_000_000).endswith("no budget: waits until B and C end")
    assert status.activity().label == "BLOCKED by B and C on table accounts AccessExclusiveLock"
    status.apply(StatementBlocked("D", 3_000, 7, ("B",), None))
    assert status.wait_line(now_ns=1_000_000_000).endswith("waits until B ends")


def test_mysql_family_budgets_read_as_durations():
    """lock_wait_timeout's default on MySQL and MariaDB is a year; the innodb ceilings
    (MariaDB 10^8 s, MySQL 2^30 s) are years too: never in exponent notation."""
    from lockrace.core.events import Budget
    from lockrace.render.transcript import budget_text

    assert budget_text(Budget("lock_wait_timeout", 31_536_000_000.0)) == "lock_wait_timeout 1 year"
    assert budget_text(Budget("innodb_lock_wait_timeout", 50_000.0)) == "innodb_lock_wait_timeout 50 s"
    for ceiling_s in (100_000_000, 1_073_741_824):
        text = budget_text(Budget("innodb_lock_wait_timeout", ceiling_s * 1000.0))
        assert text.endswith(" years") and "e+" not in text, text
    assert budget_text(Budget("NOWAIT", 0.0)) == "NOWAIT"
