"""Every relative link and image in the README, CONTRIBUTING and docs/ points at a file that exists,
and the README stays a front page (the manual lives in docs/)."""

from __future__ import annotations

import re
from support.paths import REPO

LINK = re.compile(r"\]\(([^)#\s]+)(#[^)]*)?\)")


def _documents():
    yield REPO / "README.md"
    yield REPO / "CONTRIBUTING.md"
    yield from sorted((REPO / "docs").glob("*.md"))


def test_relative_links_point_at_files():
    broken = []
    for doc in _documents():
        for target, _anchor in LINK.findall(doc.read_text(encoding="utf-8")):
            if "://" in target:
                continue
            if not (doc.parent / target).exists():
                broken.append(f"{doc.relative_to(REPO)} -> {target}")
    assert broken == []


def test_readme_is_a_front_page():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300
    assert lines[2] == "```sh" and "lockrace" in lines[3] and "pytest" in lines[4]
    assert (REPO / "LICENSE").read_text().startswith("MIT License")
