"""Where the isolation-spec test data lives, and how to run a spec in a test."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(__file__).resolve().parents[2] / "shared"
PEER = SHARED / "peer" / "pg-isolation"
UPSTREAM = REPO / "tests" / "isolation" / "upstream"
MARIADB = REPO / "tests" / "isolation" / "mariadb"


def peer_dir() -> Path:
    """../shared/peer/pg-isolation beside the repository; fail (not skip) if absent."""
    if not (PEER / "specs").is_dir() or not (PEER / "expected").is_dir():
        pytest.fail(f"PostgreSQL isolation specs not found at {PEER}: the shared/ folder must sit beside the "
                    "repository (shared/peer/pg-isolation/specs and expected)")
    return PEER


def specs_in(folder: Path) -> list[Path]:
    return sorted((folder / "specs").glob("*.spec"))


def matches(output: bytes, expected_dir: Path, name: str) -> tuple[bool, Path]:
    """Does ``output`` equal expected/NAME.out or one of its _N alternatives?"""
    base = expected_dir / f"{name}.out"
    for cand in [base, *sorted(expected_dir.glob(f"{name}_[0-9].out"))]:
        if cand.exists() and cand.read_bytes() == output:
            return True, cand
    return False, base


async def run_to_bytes(spec_path: Path, backend, step_timeout: float = 30.0) -> tuple[bytes, bool]:
    from lockrace.isolation.execute import run_spec
    from lockrace.scenario.spec_format import read_spec

    out = bytearray()
    completed = await run_spec(read_spec(spec_path), backend, out.extend, step_timeout=step_timeout)
    return bytes(out), completed
