"""Reading big isolation specs: time and peak memory of the .spec reader.

A spec with no permutation lines runs every interleaving of its sessions'
steps.  One session of N steps beside a one-step session has N + 1
interleavings of N + 1 steps each; the reader builds each one only when it is
run, so reading stays linear in the file's size.

    python bench/spec_read.py                 # 300, 1000, 3000 and 10000 steps
    python bench/spec_read.py --steps 3000

tests/unit/test_fault_parsers.py asserts the memory stays linear (no wall-clock check).
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lockrace.scenario.spec_format import parse_spec  # noqa: E402


def big_spec(steps: int) -> str:
    return ("session s1\n" + "".join(f"step s{i} {{ SELECT {i}; }}\n" for i in range(steps))
            + "session s2\nstep t { SELECT 0; }\n")


def measure(steps: int) -> tuple[int, float, float, int]:
    text = big_spec(steps)
    tracemalloc.start()
    start = time.perf_counter_ns()
    scenario = parse_spec(text, "big.spec")
    elapsed_ms = (time.perf_counter_ns() - start) / 1e6
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return len(text), elapsed_ms, peak / 2**20, len(scenario.permutations)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, nargs="*", default=[300, 1000, 3000, 10000])
    args = parser.parse_args()
    print(f"{'steps':>6} {'file KB':>8} {'read ms':>9} {'peak MiB':>9} {'interleavings':>14}")
    for steps in args.steps:
        size, ms, mib, perms = measure(steps)
        print(f"{steps:>6} {size / 1024:>8.1f} {ms:>9.1f} {mib:>9.2f} {perms:>14}")


if __name__ == "__main__":
    main()
