"""mypy (configured in pyproject.toml: [tool.mypy]) finds no type error in the package."""

from __future__ import annotations

import subprocess
import sys
from support.paths import REPO


def test_mypy_is_clean():
    done = subprocess.run([sys.executable, "-m", "mypy"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
