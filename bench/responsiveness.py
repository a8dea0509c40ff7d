"""Responsiveness of the lockrace app, measured in a real pseudo-terminal.

Starts ``python -m lockrace`` (embedded PostgreSQL 18) in a pty of 160x48,
the way a terminal would, and measures from the outside:

* start-up to interactive: spawn until the header names the server (the app
  sets it once the sessions are connected and the sandbox is ready);
* keypress-to-screen latency with three sessions blocked (B, C and D wait on
  A's row lock): time from writing one key to the pty until the terminal
  output contains the input line with that key echoed;
* CPU while idle-waiting: the app process's user+system time over a few
  seconds in which nothing is typed and the three sessions stay blocked;
* quit: Ctrl+Q until the process exits (statements cancelled, transactions
  rolled back, server stopped).

Targets: latency < 50 ms, idle CPU < 5 % of a core, start-up < 2 s.
Prints figures; it is a benchmark, not a test.

    python bench/responsiveness.py [--keys 40] [--idle 5]
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import re
import select
import signal
import statistics
import struct
import sys
import termios
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ANSI = re.compile(r"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>]")
COLS, ROWS = 160, 48
TICK = os.sysconf("SC_CLK_TCK")


class Terminal:
    """A child process on a pty, with everything it printed, ANSI-stripped and timestamped."""

    def __init__(self, argv: list[str], cols: int = COLS, rows: int = ROWS):
        pid, fd = pty.fork()
        if pid == 0:  # child
            os.chdir(ROOT)
            env = dict(os.environ, TERM="xterm-256color", COLORTERM="truecolor", PYTHONPATH=str(ROOT))
            os.execvpe(argv[0], argv, env)
        self.pid, self.fd = pid, fd
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.text = ""
        self.raw_bytes = 0

    def pump(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return False
        try:
            data = os.read(self.fd, 1 << 16)
        except OSError:
            return False
        self.raw_bytes += len(data)
        self.text += ANSI.sub("", data.decode("utf-8", "replace"))
        return True

    def wait_for(self, needle: str, timeout: float, since: int = 0) -> float:
        """Seconds until ``needle`` shows in the output after offset ``since``."""
        t0 = time.perf_counter()
        while needle not in self.text[since:]:
            if time.perf_counter() - t0 > timeout:
                raise TimeoutError(f"{needle!r} did not appear within {timeout} s")
            self.pump(0.05)
        return time.perf_counter() - t0

    def drain(self, seconds: float) -> None:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            self.pump(max(0.0, end - time.perf_counter()))

    def send(self, data: str) -> None:
        os.write(self.fd, data.encode())

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime

    def type_line(self, text: str) -> None:
        for ch in text:
            self.send(ch)
            self.drain(0.01)
        self.send("\r")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=40, help="keystrokes to time (default 40)")
    ap.add_argument("--idle", type=float, default=5.0, help="seconds of idle waiting to measure CPU over")
    ap.add_argument("--profile", metavar="FILE", help="run the app under cProfile, writing stats to FILE")
    ap.add_argument("--poll-blocked", type=float, metavar="SECONDS",
                    help="experiment: the engine's monitor poll interval while every statement is blocked "
                         "(lockrace.engine.race.POLL_BLOCKED_S, 0.1 by default)")
    ap.add_argument("--size", default=f"{COLS}x{ROWS}", help=f"terminal size COLSxROWS (default {COLS}x{ROWS}; "
                    "from 170 columns the panels stand side by side)")
    args = ap.parse_args()
    cols, rows = (int(v) for v in args.size.lower().split("x"))

    t_spawn = time.perf_counter()
    argv = [sys.executable, "-m", "lockrace"]
    if args.poll_blocked is not None:
        argv = [sys.executable, "-c", "import sys, lockrace.engine.race as r; "
                f"r.POLL_BLOCKED_S = {args.poll_blocked!r}; from lockrace.cli import main; sys.exit(main([]))"]
    if args.profile:
        argv = [sys.executable, "-m", "cProfile", "-o", args.profile, "-m", "lockrace"]
    term = Terminal(argv, cols, rows)
    try:
        first_paint = term.wait_for("type SQL", 20)
        startup = term.wait_for("(embedded) · engine: postgres", 30)
        startup = time.perf_counter() - t_spawn
        term.drain(0.5)

        # A holds row 1; B, C and D queue behind it with no budget
        term.type_line("BEGIN;")  # A's input line has the focus at start
        term.drain(0.3)
        term.type_line("UPDATE accounts SET balance = 1 WHERE id = 1;")
        term.drain(0.3)
        for key in "bcd":
            mark = len(term.text)
            term.send("\t")  # Tab: next panel
            term.drain(0.1)
            term.type_line("UPDATE accounts SET balance = 2 WHERE id = 1;")
            term.wait_for("BLOCKED by A", 10, since=mark)
        blocked_at = time.perf_counter()
        term.drain(1.0)

        # idle CPU: nobody types, three sessions blocked, timeline and counters redrawing
        def idle_share(seconds: float) -> float:
            cpu0, wall0 = term.cpu_seconds(), time.perf_counter()
            term.drain(seconds)
            return (term.cpu_seconds() - cpu0) / (time.perf_counter() - wall0)

        idle_cpu = idle_share(args.idle)
        early = time.perf_counter() - blocked_at
        term.drain(max(0.0, 11.0 - early))  # waits past 10 s: the counters show whole seconds
        late_from = time.perf_counter() - blocked_at
        idle_cpu_late = idle_share(args.idle)

        # keypress-to-screen: type into A's input line, one key at a time
        term.send("\x1b[Z\x1b[Z\x1b[Z")  # Shift+Tab three times: back from D to A
        term.drain(0.3)
        typed = "QZ"
        for ch in typed:
            term.send(ch)
            term.drain(0.1)
        latencies = []
        alphabet = "XJVKWYQZ"
        for i in range(args.keys):
            ch = alphabet[i % len(alphabet)]
            typed += ch
            mark = len(term.text)
            t0 = time.perf_counter()
            term.send(ch)
            token = typed[-10:]
            while token not in term.text[mark:]:
                if time.perf_counter() - t0 > 5:
                    raise TimeoutError(f"key {i} never reached the screen")
                term.pump(0.002)
            latencies.append((time.perf_counter() - t0) * 1000)
            term.drain(0.08)  # a fast typist: ~10 keys a second
        term.send("\x15")  # ctrl+u clears the input line

        # quit cleanly
        t_quit = time.perf_counter()
        term.send("\x11")  # ctrl+q
        while True:
            pid, status = os.waitpid(term.pid, os.WNOHANG)
            if pid:
                break
            term.pump(0.05)
            if time.perf_counter() - t_quit > 30:
                raise TimeoutError("the app did not quit within 30 s")
        quit_s = time.perf_counter() - t_quit
    except BaseException:
        os.kill(term.pid, signal.SIGTERM)
        raise

    latencies.sort()
    p95 = latencies[int(0.95 * (len(latencies) - 1))]
    print(f"lockrace app responsiveness (pty {cols}x{rows}, embedded PostgreSQL 18, {os.cpu_count()} cores)")
    print(f"  first screen (\"starting …\")        {first_paint * 1000:7.0f} ms")
    print(f"  start-up to interactive             {startup * 1000:7.0f} ms   target < 2000 ms")
    print(f"  keypress-to-screen, 3 blocked       median {statistics.median(latencies):5.1f} ms, "
          f"p95 {p95:5.1f} ms, max {max(latencies):5.1f} ms over {len(latencies)} keys   target < 50 ms")
    print(f"  CPU while idle-waiting (3 blocked)  {idle_cpu * 100:7.1f} % of a core, seconds 1-{early:.0f} of the waits"
          f"   target < 5 %")
    print(f"                                      {idle_cpu_late * 100:7.1f} % of a core, seconds {late_from:.0f}-"
          f"{late_from + args.idle:.0f} of the waits")
    print(f"  quit (Ctrl+Q) to process exit       {quit_s * 1000:7.0f} ms   exit status {os.waitstatus_to_exitcode(status)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
