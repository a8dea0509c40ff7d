"""Built-in scenarios: the ``scenarios/`` folder, shipped inside the wheel."""

from __future__ import annotations

from pathlib import Path

from .errors import ScenarioError
from .model import Scenario

SUFFIXES = (".race", ".spec")


def scenarios_dir() -> Path:
    here = Path(__file__).resolve().parent.parent
    installed = here / "scenarios"  # inside the wheel
    if installed.is_dir():
        return installed
    return here.parent / "scenarios"  # a source checkout / editable install


def builtin_paths() -> list[Path]:
    folder = scenarios_dir()
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.suffix == ".race")


def load(path: Path) -> Scenario:
    if path.suffix == ".spec":
        from .spec_format import read_spec

        return read_spec(path)
    from .text_format import read_scenario

    return read_scenario(path)


def builtins() -> list[Scenario]:
    return [load(p) for p in builtin_paths()]


def resolve(name_or_path: str) -> Scenario:
    """A built-in by name (``pg-nowait``) or a file path."""
    path = Path(name_or_path)
    if path.suffix in SUFFIXES or "/" in name_or_path or path.exists():
        if not path.exists():
            raise ScenarioError(path, None, "no such file")
        return load(path)
    candidate = scenarios_dir() / f"{name_or_path}.race"
    if candidate.exists():
        return load(candidate)
    names = ", ".join(p.stem for p in builtin_paths())
    raise ScenarioError(name_or_path, None, f"no built-in scenario of that name (built-ins: {names})")
