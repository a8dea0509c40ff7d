"""Where the isolation-spec test data lives, and how to run a spec in a test."""

from __future__ import annotations

from pathlib import Path
from support.paths import REPO

# PostgreSQL's own isolation specs and expected outputs, vendored with their
# licence notice (tests/isolation/upstream/README.md and LICENSE)
UPSTREAM = REPO / "tests" / "isolation" / "upstream"
MARIADB = REPO / "tests" / "isolation" / "mariadb"
# The six specs of REL_18_STABLE that lockrace's isolation support started from
REFERENCE_SPECS = ["deadlock-simple", "nowait", "skip-locked-3", "skip-locked", "timeouts", "tuplelock-conflict"]


def upstream_spec(name: str) -> Path:
    return UPSTREAM / "specs" / f"{name}.spec"


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
