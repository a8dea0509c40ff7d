"""The engine side never imports Textual: the UI is a thin consumer of events."""

import ast
from pathlib import Path

import pytest
from support.paths import REPO

ROOT = REPO / "lockrace"
ENGINE_SIDE = ["core", "dialects", "engine", "backends", "servers", "scenario", "render", "isolation", "lab", "locks", "rehearse", "runtime"]


def _modules():
    for package in ENGINE_SIDE:
        folder = ROOT / package
        if folder.is_dir():
            yield from sorted(folder.rglob("*.py"))


@pytest.mark.parametrize("path", list(_modules()), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_textual_import(path):
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        for name in names:
            assert name.split(".")[0] != "textual", f"{path.relative_to(ROOT)}:{node.lineno} imports {name}"


def test_engine_import_does_not_load_textual():
    import subprocess
    import sys

    code = ("import sys, lockrace.engine.race, lockrace.engine.runner, lockrace.backends.postgres, "
            "lockrace.backends.mysql, lockrace.servers.target, lockrace.scenario.library, lockrace.render.transcript, "
            "lockrace.locks.cli, lockrace.locks.pg, lockrace.locks.mysql, lockrace.rehearse.cli; "
            "print('textual' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT.parent, check=True)
    assert out.stdout.strip() == "False"


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every module ``path`` imports (at any depth in the file), as absolute names."""
    package = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts[:-1])
    out = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[: len(base) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            out.append((node.lineno, name))
            out.extend((node.lineno, f"{name}.{a.name}") for a in node.names)
    return out


def test_only_the_entry_point_imports_the_command_line():
    """``lockrace.cli`` is the top: the servers, isolation and lab commands never import it
    back (one server pool in ``lockrace.runtime.pool`` serves them all)."""
    offenders = []
    for path in sorted(ROOT.rglob("*.py")):
        if path.name == "__main__.py" or path == ROOT / "cli.py":
            continue
        for line, name in _imports(path):
            if name == "lockrace.cli" or name.startswith("lockrace.cli."):
                offenders.append(f"{path.relative_to(ROOT)}:{line}")
    assert offenders == []


def test_backends_and_engine_do_not_import_each_other():
    """Shared types sit below both (``lockrace.core``): core imports nothing else from
    lockrace, the backends never import the engine (the engine drives the backends)."""
    offenders = []
    for path in sorted((ROOT / "core").rglob("*.py")):
        offenders += [f"core/{path.name}:{line} {name}" for line, name in _imports(path)
                      if name.startswith("lockrace.") and not name.startswith("lockrace.core")]
    for path in sorted((ROOT / "backends").rglob("*.py")):
        offenders += [f"backends/{path.name}:{line} {name}" for line, name in _imports(path)
                      if name == "lockrace.engine" or name.startswith("lockrace.engine.")]
    assert offenders == []
