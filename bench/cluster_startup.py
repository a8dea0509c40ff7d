"""Start-up time of a private cluster: same as ``lockrace bench --cluster NAME``.

    python bench/cluster_startup.py                 # galera, 3 runs
    python bench/cluster_startup.py --cluster postgres-standby --runs 5
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lockrace.cli import main  # noqa: E402

if __name__ == "__main__":
    args = sys.argv[1:]
    if "--cluster" not in args:
        args = ["--cluster", "galera", *args]
    if "--runs" not in args:
        args += ["--runs", "3"]
    sys.exit(main(["bench", *args]))
