"""Where the tests find the repository and their data, from any folder of tests/."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]  # tests/support/paths.py -> the repository
TESTS = REPO / "tests"
DATA = TESTS / "data"  # small inputs: .race and .spec files, verdicts
ISOLATION = TESTS / "isolation"  # specs and expected outputs: upstream, mariadb, mysql
