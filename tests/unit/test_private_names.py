"""No module of lockrace uses another module's private (``_underscore``) names.

A name that begins with one underscore belongs to the module that defines it:
no ``from x import _y``, and no ``obj._y`` on anything but ``self``/``cls``
unless this module defines ``_y`` itself (a class of its own, used by a
helper of the same module).  What PyMySQL keeps private is touched only in
lockrace/backends/pymysql_adapter.py, which gives it public names.
"""

from __future__ import annotations

import ast
from pathlib import Path

from support.paths import REPO

ROOT = REPO / "lockrace"
ADAPTERS = {ROOT / "backends" / "pymysql_adapter.py"}
# private by name only: documented public API of the standard library
STDLIB_PUBLIC = {("os", "_exit")}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _own_names(tree: ast.AST) -> set[str]:
    """The names a module defines: its functions, classes and their members (what
    ``self``/``cls`` is given, class-level names, ``__slots__``), module-level names."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
                and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ClassDef):
            pass
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets):
            names.update(c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant) and isinstance(c.value, str))
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def _violations(path: Path, root: Path = ROOT) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    own = _own_names(tree)
    where = path.relative_to(root.parent)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            found += [f"{where}:{node.lineno}: imports {a.name} from {node.module or '.'}"
                      for a in node.names if _private(a.name)]
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                continue
            if isinstance(owner, ast.Name) and (owner.id, node.attr) in STDLIB_PUBLIC:
                continue
            if path in ADAPTERS:
                continue  # the one module that may touch a driver's internals
            if node.attr in own:
                continue  # this module's own private name
            found.append(f"{where}:{node.lineno}: uses {ast.unparse(node)}")
    return found


def test_no_module_uses_another_modules_private_names():
    found = [v for path in sorted(ROOT.rglob("*.py")) for v in _violations(path)]
    assert not found, "\n".join(found)


def test_the_check_finds_what_it_should(tmp_path):
    """The rule itself: a private import, another module's member, a driver's member."""
    sample = tmp_path / "pkg" / "sample.py"
    sample.parent.mkdir()
    sample.write_text(
        "from .mysql import _Connection\n"
        "import pymysql\n"
        "class Mine:\n"
        "    def __init__(self):\n"
        "        self._own = 1\n"
        "    def f(self, other, conn):\n"
        "        other._own, self._x = 2, 3\n"  # its own: fine
        "        conn._sock.close()\n"  # PyMySQL's: not here
        "        pymysql._private()\n"
        "        import os\n"
        "        os._exit(0)\n"  # public, documented
    )
    found = _violations(sample, sample.parent)
    assert sorted(f.split(": ", 1)[1] for f in found) == [
        "imports _Connection from mysql", "uses conn._sock", "uses pymysql._private"], found
