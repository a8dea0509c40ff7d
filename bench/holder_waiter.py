"""Holder vs waiter, every wait mode: same as ``lockrace bench [flags]``.

    python bench/holder_waiter.py --runs 30
    python bench/holder_waiter.py --engine mysql --json
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lockrace.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
