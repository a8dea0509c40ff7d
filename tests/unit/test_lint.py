"""ruff (configured in pyproject.toml) is clean on the package, the tests, the benches and the scripts."""

from __future__ import annotations

import subprocess
import sys
from support.paths import REPO



def test_ruff_is_clean():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "lockrace", "tests", "bench", "scripts"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
