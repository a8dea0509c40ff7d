"""Engine overhead: same as ``lockrace bench --overhead [flags]``.

NOWAIT refusals and bounded waits through lockrace's engine and through the bare
driver, interleaved, 30 runs each.

    python bench/overhead.py
    python bench/overhead.py --engine mysql --json
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lockrace.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["bench", "--overhead", *sys.argv[1:]]))
